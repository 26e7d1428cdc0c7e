# Correct ops in the style of the 25.x-26.1 examples (issue 31): read by the static scan only (this machine has MAX 26.7).
