# Rules for the tools area (owned by that area's work; included from Makefile.am).
