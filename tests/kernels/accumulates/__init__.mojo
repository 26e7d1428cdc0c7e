# A package whose op adds into its output instead of writing it (a deliberate bug, issue 31).
