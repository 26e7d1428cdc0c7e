# A package whose CPU branch is a placeholder that writes zeros (a deliberate bug).
