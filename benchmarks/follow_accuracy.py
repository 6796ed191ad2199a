# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Following accuracy of localizer -> tracker -> follower against walking speed.

Set-up (printed): :func:`people_following.follow_simulation.simulate_chain`, simulated time, no
wall-clock figures. A person stands 2.5 m ahead for 4 s, walks straight until 12 s, then
on a 5 m curve to the left, and vanishes at 24 s. A unicycle robot executes each 20 Hz
command exactly. A 10 Hz RGB-D camera (320x240 RGB, 160x120 depth, 70° HFOV, 0.5 m up,
pitched 15° up) is ray-cast against the person (a 0.4 m cylinder with 17 COCO joints),
with 1 px keypoint noise, 2 cm depth noise and 5 % depth dropouts. A frame's result
reaches the follower one control cycle later. The follower runs two profiles: the packaged
defaults (set distance 1.2 m, k_linear 2.5 /s, max_linear 0.6 m/s, braking 2 m/s²), which
cannot keep up with a person walking faster than 0.6 m/s, and a fast one (max_linear 1.5
m/s, accelerating 1 m/s², braking 3 m/s², the least that still stops from 1.5 m/s within
the 0.5 s budget). Each with the tracked velocity fed forward (gain 1) or not (gain 0),
side by side on the same seeded runs.

Above about 1.2 m/s the fast profile falls behind too, by design: the freshness envelope
(stop within 0.5 s of the last observation) caps the speed at braking × (0.5 s − the data's
age), 3 m/s² × 0.4 s = 1.2 m/s with results 0.1 s old.

The error is the true base-to-person distance minus the set distance, from 8 s (settled)
until the person vanishes. The stop time runs from the last frame that saw the person to
the first zero command after it. Writes a table (stdout) and a plot:

    python benchmarks/follow_accuracy.py --out results/follow_accuracy
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import numpy as np

from people_following.follow_simulation import GONE_S, SETTLED_S, make_walker, simulate_chain
from people_following.follower import FollowerConfig

SPEEDS = (0.3, 0.5, 0.8, 1.0, 1.2, 1.4)
PROFILES = {
    'default': FollowerConfig(),
    'fast': replace(FollowerConfig(), max_linear=1.5, max_linear_accel=1.0, stop_decel_linear=3.0),
}


def measure(profile: str, speed: float, gain: float, seed: int) -> dict[str, float]:
    """Return the errors and stop time of one run."""
    config = replace(PROFILES[profile], feed_forward_gain=gain)
    run = simulate_chain(GONE_S + 3.0, make_walker(speed), seed=seed, follower_config=config)
    times = np.array(run.times)
    errors = np.array(run.distances)[(times >= SETTLED_S) & (times < GONE_S)]
    errors -= config.set_distance_m
    stopped = [
        t
        for t, c in zip(run.times, run.commands, strict=True)
        if run.last_seen_s is not None and t > run.last_seen_s and c.linear == c.angular == 0.0
    ]
    return {
        'median': float(np.median(errors)),
        'p95_abs': float(np.percentile(np.abs(errors), 95)),
        'max_abs': float(np.max(np.abs(errors))),
        'stop_s': stopped[0] - run.last_seen_s if stopped else float('nan'),
        'localization_m': float(np.median(run.localization_errors)),
    }


def main() -> None:
    """Print the table and write the plot."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--out', type=Path, default=Path('results/follow_accuracy'))
    parser.add_argument('--seeds', type=int, default=3, help='runs per speed and gain')
    args = parser.parse_args()
    print(__doc__.split('Set-up (printed): ')[1].split('The error is')[0].strip())
    header = (
        f'{"profile":>7} {"speed m/s":>9} {"feed-fwd":>8} {"median err m":>12} '
        f'{"p95 |err| m":>11} {"max |err| m":>11} {"stop s":>6} {"loc. err m":>10}'
    )
    print('\n' + header + '\n' + '-' * len(header))
    rows = {}
    for profile in PROFILES:
        for speed in SPEEDS:
            for gain in (0.0, 1.0):
                runs = [measure(profile, speed, gain, seed) for seed in range(args.seeds)]
                row = {key: float(np.mean([r[key] for r in runs])) for key in runs[0]}
                row['max_abs'] = max(r['max_abs'] for r in runs)
                row['stop_s'] = max(r['stop_s'] for r in runs)
                rows[profile, speed, gain] = row
                print(
                    f'{profile:>7} {speed:9.1f} {"on" if gain else "off":>8} '
                    f'{row["median"]:12.3f} {row["p95_abs"]:11.3f} {row["max_abs"]:11.3f} '
                    f'{row["stop_s"]:6.2f} {row["localization_m"]:10.3f}'
                )
    print(f'(means over {args.seeds} seeds; max |err| and stop: the worst seed)')

    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(PROFILES), figsize=(11, 4), sharey=True)
    for axis, profile in zip(axes, PROFILES, strict=True):
        for gain, label in ((0.0, 'feedback only'), (1.0, 'velocity fed forward')):
            key = [(profile, s, gain) for s in SPEEDS]
            axis.plot(SPEEDS, [rows[k]['median'] for k in key], 'o-', label=label)
            axis.fill_between(
                SPEEDS, [-rows[k]['max_abs'] for k in key], [rows[k]['max_abs'] for k in key],
                alpha=0.1,
            )  # fmt: skip
        axis.axhspan(-0.3, 0.3, color='green', alpha=0.08, label='±0.3 m acceptance band')
        axis.set_title(f'{profile} profile (max_linear {PROFILES[profile].max_linear} m/s)')
        axis.set_xlabel('walking speed (m/s)')
        axis.set_ylim(-0.5, 1.0)
        axis.grid(alpha=0.3)
    axes[0].set_ylabel('distance error (m): median; band: max |err|')
    axes[0].legend()
    args.out.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(args.out / 'follow_accuracy.png', dpi=120)
    print(f'plot: {args.out / "follow_accuracy.png"}')


if __name__ == '__main__':
    main()
