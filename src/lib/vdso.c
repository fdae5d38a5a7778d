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

struct vdso_tables {
	const ElfW(Sym) *sym;
	const char *str;
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
	for (; d->d_tag != DT_NULL; d++) {
		if (d->d_tag == DT_SYMTAB)
			t->sym = (const void *)(*bias + d->d_un.d_ptr);
		else if (d->d_tag == DT_STRTAB)
			t->str = (const void *)(*bias + d->d_un.d_ptr);
		else if (d->d_tag == DT_HASH)
			hash = (const void *)(*bias + d->d_un.d_ptr);
	}
	if (!t->sym || !t->str || !hash)
		return 0;
	t->nsym = hash[1]; /* nbucket, nchain: one chain entry per symbol */
	return 1;
}

void *bhi_vdso_sym(const char *name)
{
	const ElfW(Ehdr) *eh = (const void *)getauxval(AT_SYSINFO_EHDR);
	struct vdso_tables t;
	uintptr_t bias = 0;

	if (!eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh->e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) ||
	    !find_tables(eh, &t, &bias))
		return NULL;
	for (uint32_t i = 0; i < t.nsym; i++) {
		const ElfW(Sym) *s = &t.sym[i];

		if (ELF64_ST_TYPE(s->st_info) == STT_FUNC && s->st_shndx != SHN_UNDEF &&
		    strcmp(t.str + s->st_name, name) == 0)
			return (void *)(bias + s->st_value);
	}
	return NULL;
}
