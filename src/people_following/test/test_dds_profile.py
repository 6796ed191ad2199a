# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""When the graph sets the Fast DDS profile for frames, and that the profile is valid XML."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree

import pytest

from people_following.dds_profile import USER_VARIABLES, large_frames_profile, profile_path


def test_profile_is_set_where_dds_is_not_configured() -> None:
    assert large_frames_profile({}) == str(profile_path())
    assert large_frames_profile({'RMW_IMPLEMENTATION': 'rmw_fastrtps_cpp'}) == str(profile_path())
    assert large_frames_profile({'RMW_IMPLEMENTATION': ''}) == str(profile_path())


@pytest.mark.parametrize('variable', USER_VARIABLES)
def test_a_user_configuration_is_left_alone(variable: str) -> None:
    assert large_frames_profile({variable: 'mine.xml'}) is None


def test_other_middleware_is_left_alone() -> None:
    assert large_frames_profile({'RMW_IMPLEMENTATION': 'rmw_cyclonedds_cpp'}) is None


def test_profile_gives_frames_a_large_shared_memory_segment_and_keeps_udp() -> None:
    namespace = {'dds': 'http://www.eprosima.com'}
    root = ElementTree.parse(profile_path()).getroot()  # noqa: S314 - our own file
    descriptors = {
        d.findtext('dds:transport_id', namespaces=namespace): d
        for d in root.iterfind('.//dds:transport_descriptor', namespace)
    }
    kinds = {d.findtext('dds:type', namespaces=namespace): d for d in descriptors.values()}
    assert sorted(kinds) == ['SHM', 'UDPv4']
    shm = kinds['SHM']
    # A 768x576 bgr8 frame (1.3 MB) and a 1080p one (6.2 MB) fit whole.
    assert int(shm.findtext('dds:segment_size', namespaces=namespace)) >= 8 * 1024 * 1024
    participant = root.find('.//dds:participant', namespace)
    assert participant.get('is_default_profile') == 'true'
    used = [
        t.text for t in participant.iterfind('.//dds:userTransports/dds:transport_id', namespace)
    ]
    assert sorted(used) == sorted(descriptors)
