# A correct op whose CPU-only host code sits under a test the static scan does not read (issue 31): the scan flags it, every device passes against a reference, so the finding is a notice.
