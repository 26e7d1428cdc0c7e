# Correct ops written as MAX 26.7 examples write them (issue 31): nothing here may be reported as host code.
