# A package whose op never writes its output (a deliberate bug, issue 39).
