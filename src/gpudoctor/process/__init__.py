"""Child processes under control: one supervisor (own group, deadline, bounded capture, nothing left running), one
cancellation scope, the stop policy, and how a process ended."""
