/* The vDSO's dynamic symbol table, read from the image the kernel mapped
 * into every process: its ELF header is at getauxval(AT_SYSINFO_EHDR), and
 * its PT_DYNAMIC segment gives the symbol and string tables and the SysV
 * hash table, whose chain count is the number of symbols (the ELF gABI,
 * "Dynamic Section" and "Hash Table"; the x86-64 vDSO is linked with both
 * hash styles). Only the program headers are followed: they are inside the
 * first loaded page, which section headers need not be. */
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <sys/auxv.h>

#include "vdso.h"

#if __ELF_NATIVE_CLASS == 64
#define SYM_TYPE ELF64_ST_TYPE
#define NATIVE_CLASS ELFCLASS64
#else
#define SYM_TYPE ELF32_ST_TYPE
#define NATIVE_CLASS ELFCLASS32
#endif

struct vdso_tables {
	const ElfW(Sym) *sym;
	const char *str;
	size_t strsz;
	uint32_t nsym;
};

/* The load bias (where vaddr 0 is) and the dynamic section; false: none. */
static int find_dynamic(const ElfW(Ehdr) *eh, uintptr_t *bias, const ElfW(Dyn) **dyn)
{
	const ElfW(Phdr) *ph = (const void *)((const char *)eh + eh->e_phoff);
	uintptr_t dyn_vaddr = 0;
	int have_load = 0;

	for (unsigned i = 0; i < eh->e_phnum; i++) {
		if (ph[i].p_type == PT_LOAD && !have_load) {
			*bias = (uintptr_t)eh + ph[i].p_offset - ph[i].p_vaddr;
			have_load = 1;
		} else if (ph[i].p_type == PT_DYNAMIC) {
			dyn_vaddr = ph[i].p_vaddr;
		}
	}
	if (!have_load || !dyn_vaddr)
		return 0;
	*dyn = (const void *)(*bias + dyn_vaddr);
	return 1;
}

static int find_tables(const ElfW(Ehdr) *eh, struct vdso_tables *t, uintptr_t *bias)
{
	const ElfW(Dyn) *d;
	const uint32_t *hash = NULL;

	if (!find_dynamic(eh, bias, &d))
		return 0;
	t->sym = NULL;
	t->str = NULL;
	t->strsz = 0;
	for (; d->d_tag != DT_NULL; d++) {
		if (d->d_tag == DT_SYMTAB)
			t->sym = (const void *)(*bias + d->d_un.d_ptr);
		else if (d->d_tag == DT_STRTAB)
			t->str = (const void *)(*bias + d->d_un.d_ptr);
		else if (d->d_tag == DT_STRSZ)
			t->strsz = d->d_un.d_val;
		else if (d->d_tag == DT_HASH)
			hash = (const void *)(*bias + d->d_un.d_ptr);
	}
	if (!t->sym || !t->str || !t->strsz || !hash)
		return 0;
	t->nsym = hash[1]; /* nbucket, nchain: one chain entry per symbol */
	return 1;
}

void *bhi_vdso_sym(const char *name)
{
	const ElfW(Ehdr) *eh = (const void *)getauxval(AT_SYSINFO_EHDR);
	struct vdso_tables t;
	uintptr_t bias = 0;

#if defined(__s390x__) || defined(__alpha__)
	/* Their hash tables have 64-bit entries; their vDSOs name the clock
	 * otherwise anyway. */
	(void)eh;
	(void)t;
	(void)bias;
	return NULL;
#else
	size_t len = strlen(name);

	if (!eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh->e_ident[EI_CLASS] != NATIVE_CLASS ||
	    eh->e_phentsize != sizeof(ElfW(Phdr)) || !find_tables(eh, &t, &bias))
		return NULL;
	for (uint32_t i = 0; i < t.nsym; i++) {
		const ElfW(Sym) *s = &t.sym[i];

		/* the name and its NUL inside the string table */
		if (SYM_TYPE(s->st_info) == STT_FUNC && s->st_shndx != SHN_UNDEF &&
		    s->st_name < t.strsz && t.strsz - s->st_name > len &&
		    memcmp(t.str + s->st_name, name, len + 1) == 0)
			return (void *)(bias + s->st_value);
	}
	return NULL;
#endif
}
