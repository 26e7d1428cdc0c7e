"""The user's own reproducer: run under a probe's isolation and diagnosed (`gpudoctor run`), and bisected across
releases in sweep cells (`gpudoctor bisect`)."""
