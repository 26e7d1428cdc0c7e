# A package whose op reads past its second input (a deliberate bug, issue 36).
