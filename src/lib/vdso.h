/* A function of the kernel's vDSO, looked up by name. Private: the prefix
 * is bhi_; include it as "lib/vdso.h". */
#ifndef BHI_VDSO_H
#define BHI_VDSO_H

/* The address of the vDSO's function called name (e.g.
 * "__vdso_clock_gettime" on x86-64), or NULL: no vDSO (valgrind, a process
 * started without one), no such symbol (another architecture names it
 * otherwise), or an image this parser does not follow. Reads the image the
 * kernel mapped (getauxval(AT_SYSINFO_EHDR)); no libdl, so it works in
 * static binaries too. Allocates nothing, may be called from any thread. */
void *bhi_vdso_sym(const char *name);

#endif /* BHI_VDSO_H */
