# A package whose op races between CPU threads (a deliberate bug, issue 39).
