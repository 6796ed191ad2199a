# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Collection rules of the system tests."""

# Launch tests (launch_testing modules) run under the launch_test command, started by
# test_launch_tests.py; pytest itself would run their test classes without the launch.
collect_ignore_glob = ['test_*_launch.py']
