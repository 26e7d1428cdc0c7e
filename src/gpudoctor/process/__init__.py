"""Child processes under control: one cancellation scope, the stop policy, bounded capture
and how a process ended."""
