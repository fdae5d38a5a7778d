/* The shared intrusive list (src/lib/list.h): order, links and the ends
 * after each operation, checked against an independent array of what the
 * list must hold. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "lib/list.h"

struct node {
	int id;
	struct {
		struct node *next, *prev; /* a member path, like bh_task's priv */
	} link;
};

BHI_LIST_DEFINE(nlist, struct node, link.next, link.prev)

/* The list holds exactly want[0..n) in order, linked both ways, with NULL
 * at both ends. */
static void expect(const struct nlist *h, struct node *const *want, int n)
{
	struct node *p, *prev = NULL;
	int i = 0;

	bhi_list_for_each(p, h, nlist) {
		assert_true(i < n);
		assert_ptr_equal(p, want[i]);
		assert_ptr_equal(p->link.prev, prev);
		prev = p;
		i++;
	}
	assert_int_equal(i, n);
	assert_ptr_equal(nlist_first(h), n ? want[0] : NULL);
	assert_ptr_equal(nlist_last(h), n ? want[n - 1] : NULL);
	assert_int_equal(nlist_empty(h), n == 0);
}

static void test_add_tail_is_fifo(void **state)
{
	struct node a = { .id = 1 }, b = { .id = 2 }, c = { .id = 3 };
	struct nlist h;

	(void)state;
	nlist_init(&h);
	expect(&h, NULL, 0);
	nlist_add_tail(&h, &a);
	expect(&h, (struct node *[]){ &a }, 1);
	nlist_add_tail(&h, &b);
	nlist_add_tail(&h, &c);
	expect(&h, (struct node *[]){ &a, &b, &c }, 3);
}

static void test_add_head_is_lifo(void **state)
{
	struct node a = { .id = 1 }, b = { .id = 2 }, c = { .id = 3 };
	struct nlist h = { NULL, NULL }; /* an all-zero head is empty */

	(void)state;
	expect(&h, NULL, 0);
	nlist_add_head(&h, &a);
	expect(&h, (struct node *[]){ &a }, 1);
	nlist_add_head(&h, &b);
	nlist_add_head(&h, &c);
	expect(&h, (struct node *[]){ &c, &b, &a }, 3);
	nlist_add_tail(&h, &(struct node){ .id = 4 });
	assert_int_equal(nlist_last(&h)->id, 4);
}

/* del from the middle, the head, the tail and the only node: the ends
 * follow and the removed node is left with NULL links. */
static void test_del_everywhere(void **state)
{
	struct node n[4] = { { .id = 0 }, { .id = 1 }, { .id = 2 }, { .id = 3 } };
	struct nlist h;

	(void)state;
	nlist_init(&h);
	for (int i = 0; i < 4; i++)
		nlist_add_tail(&h, &n[i]);
	nlist_del(&h, &n[1]);
	expect(&h, (struct node *[]){ &n[0], &n[2], &n[3] }, 3);
	assert_null(n[1].link.next);
	assert_null(n[1].link.prev);
	nlist_del(&h, &n[0]);
	expect(&h, (struct node *[]){ &n[2], &n[3] }, 2);
	nlist_del(&h, &n[3]);
	expect(&h, (struct node *[]){ &n[2] }, 1);
	assert_null(n[3].link.next);
	assert_null(n[3].link.prev);
	nlist_del(&h, &n[2]);
	expect(&h, NULL, 0);
	assert_null(n[2].link.next);
	assert_null(n[2].link.prev);
}

/* for_each_safe survives the body unlinking (and clearing) each node. */
static void test_for_each_safe_unlinks(void **state)
{
	struct node n[5];
	struct nlist h;
	struct node *p, *tmp;
	int seen = 0;

	(void)state;
	nlist_init(&h);
	for (int i = 0; i < 5; i++) {
		n[i].id = i;
		nlist_add_tail(&h, &n[i]);
	}
	bhi_list_for_each_safe(p, tmp, &h, nlist) {
		assert_int_equal(p->id, seen);
		seen++;
		if (p->id % 2 == 0)
			nlist_del(&h, p);
	}
	assert_int_equal(seen, 5);
	expect(&h, (struct node *[]){ &n[1], &n[3] }, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_add_tail_is_fifo),
		cmocka_unit_test(test_add_head_is_lifo),
		cmocka_unit_test(test_del_everywhere),
		cmocka_unit_test(test_for_each_safe_unlinks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
