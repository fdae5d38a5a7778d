# Rules for the uring area (owned by that area's work; included from Makefile.am).
