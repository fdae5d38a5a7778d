# Rules for the pool area (owned by that area's work; included from Makefile.am).
