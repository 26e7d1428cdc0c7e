"""A Report on disk and on screen: the strict codec and its schema, the files one run writes,
plain text and Markdown, JUnit."""
