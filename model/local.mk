# The Spin models of the core protocol and the host-wide recovery: `make model` runs model/check.sh (the
# real model must pass, every planted defect and witness must produce a
# counterexample) and leaves trails and a state-space table in ./model-out.
# Without spin it says so and succeeds, unless BH_MODEL_REQUIRE=1 (CI).
EXTRA_DIST += model/bulkhead.pml model/shm.pml model/check.sh
model:
	@rc=0; BH_MODEL_OUT=$(abs_top_builddir)/model-out \
		$(SHELL) $(top_srcdir)/model/check.sh || rc=$$?; \
	if [ $$rc -eq 77 ] && [ "$${BH_MODEL_REQUIRE:-0}" != 1 ]; then \
		echo "model: SKIPPED"; exit 0; fi; \
	exit $$rc
.PHONY: model
