# A package whose op adds into its output on every device (a deliberate bug, issue 39).
