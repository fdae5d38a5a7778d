# Rules for the metrics area (owned by that area's work; included from Makefile.am).
