/* One intrusive doubly-linked list for every layer of libbulkhead: the
 * core's waiter queue, the pool's task queue and worker lists, the io_uring
 * tracker's waiting and holding ops, the stress suite's shadow queue. Private (BHI_/bhi_ prefix); no locking: each list
 * is guarded by whoever owns it. Include it as "lib/list.h".
 *
 * The operations are the kernel's list_head ones (init, empty, first,
 * add_tail, add_head, del, for_each), but the list is typed and
 * NULL-terminated, like BSD's TAILQ, rather than a circular list of
 * embedded struct list_head:
 *  - two of the lists run through structs whose layout is public ABI
 *    (struct bh_qlink, struct bh_task_private): their links are plain
 *    `T *next, *prev` fields that cannot become another type;
 *  - outside the list a NULL next is meaningful: the stress suite walks
 *    the core queue with `q = q->next` until NULL, and the host-wide layer
 *    reuses an unqueued node's next as an index.
 * The generated code is what the hand-written lists compiled to.
 *
 * BHI_LIST_DEFINE(name, T, NEXT, PREV) defines struct name { T *first,
 * *last; } and static inline functions name_init/empty/first/last/next/
 * add_tail/add_head/del for nodes of type T, whose links are the members
 * NEXT and PREV (a member path, such as priv.next). It is BHI_LIST_HEAD
 * (the struct, for a header where T is incomplete) then BHI_LIST_OPS (the
 * functions, where T is complete). An all-zero head is an empty list; a
 * node that is on no list has NULL links (name_del leaves it so). */
#ifndef BHI_LIST_H
#define BHI_LIST_H

#include <stdbool.h>
#include <stddef.h>

/* Unused ones are fine: clang warns about an unused static inline function
 * defined in a .c file (stress/common.c uses BHI_LIST_OPS there). */
#define BHI_LIST_FN static inline __attribute__((unused))

#define BHI_LIST_DEFINE(name, T, NEXT, PREV) \
	BHI_LIST_HEAD(name, T);              \
	BHI_LIST_OPS(name, T, NEXT, PREV)

#define BHI_LIST_HEAD(name, T)                               \
	struct name {                                        \
		T *first, *last; /* NULL, NULL when empty */ \
	}

#define BHI_LIST_OPS(name, T, NEXT, PREV)                                      \
	BHI_LIST_FN void name##_init(struct name *h)                         \
	{                                                                      \
		h->first = h->last = NULL;                                     \
	}                                                                      \
                                                                               \
	BHI_LIST_FN bool name##_empty(const struct name *h)                  \
	{                                                                      \
		return h->first == NULL;                                       \
	}                                                                      \
                                                                               \
	BHI_LIST_FN T *name##_first(const struct name *h)                    \
	{                                                                      \
		return h->first;                                               \
	}                                                                      \
                                                                               \
	BHI_LIST_FN T *name##_last(const struct name *h)                     \
	{                                                                      \
		return h->last;                                                \
	}                                                                      \
                                                                               \
	BHI_LIST_FN T *name##_next(const T *n)                               \
	{                                                                      \
		return n->NEXT;                                                \
	}                                                                      \
                                                                               \
	BHI_LIST_FN void name##_add_tail(struct name *h, T *n)               \
	{                                                                      \
		n->NEXT = NULL;                                                \
		n->PREV = h->last;                                             \
		if (h->last)                                                   \
			h->last->NEXT = n;                                     \
		else                                                           \
			h->first = n;                                          \
		h->last = n;                                                   \
	}                                                                      \
                                                                               \
	BHI_LIST_FN void name##_add_head(struct name *h, T *n)               \
	{                                                                      \
		n->PREV = NULL;                                                \
		n->NEXT = h->first;                                            \
		if (h->first)                                                  \
			h->first->PREV = n;                                    \
		else                                                           \
			h->last = n;                                           \
		h->first = n;                                                  \
	}                                                                      \
                                                                               \
	BHI_LIST_FN void name##_del(struct name *h, T *n)                    \
	{                                                                      \
		if (n->PREV)                                                   \
			n->PREV->NEXT = n->NEXT;                               \
		else                                                           \
			h->first = n->NEXT;                                    \
		if (n->NEXT)                                                   \
			n->NEXT->PREV = n->PREV;                               \
		else                                                           \
			h->last = n->PREV;                                     \
		n->NEXT = n->PREV = NULL;                                      \
	}

/* Every node of list h (a struct name *), first to last. The loop body must
 * not unlink pos; bhi_list_for_each_safe's may (tmp holds the next one). */
#define bhi_list_for_each(pos, h, name) \
	for ((pos) = name##_first(h); (pos); (pos) = name##_next(pos))

#define bhi_list_for_each_safe(pos, tmp, h, name)                              \
	for ((pos) = name##_first(h); (pos) && ((tmp) = name##_next(pos), 1);  \
	     (pos) = (tmp))

#endif /* BHI_LIST_H */
