#!/bin/sh
echo "kvstore: bazel coverage is not supported by the offline build" >&2
exit 1
