# Design notes and man pages.
EXTRA_DIST += docs/design.md
