# Image pipeline benchmarks; include from the top-level Makefile:
#   include agent/image/bench.mk

.PHONY: bench-image bench-image-go

# Go benchmarks: 64 MiB images per format, httptest server, tmpfs file target.
bench-image-go: ## image pipeline Go benchmarks (64 MiB per format)
	go test -run '^$$' -bench Write -benchtime 5x ./agent/image/

# Kiln vs IPA's path and shell pipelines on a 2 GiB ext4 image and a loop
# device (root; builds the image once under /dev/shm/kiln-bench).
bench-image: ## Kiln vs IPA image writing on a 2 GiB image and a loop device (root)
	scripts/bench-image.sh
