# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""AccuMO's depth nets: shapes, cost, training, the weights files and the trained accuracy."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import yaml

from accumo_ros.metrics import depth_errors
from accumo_ros.simulation import dataset
from accumo_ros.simulation.sequence import SequenceConfig, SyntheticSequence
from accumo_ros.simulation.sequence_bag import read_sequence_bag, write_sequence_bag
from accumo_ros.tasks.depth_nets import (
    KINDS,
    MAX_DEPTH_M,
    MIN_DEPTH_M,
    DepthWeightsError,
    LiteDepthNet,
    ServerDepthNet,
    build_depth_net,
    conv_macs,
    count_parameters,
    default_weights_path,
    load_depth_net,
    read_depth_weights,
    save_depth_weights,
    weights_metadata,
)
from accumo_ros.tools import train_depth

# The machines are shared and noisy: one thread (no OpenMP spinning against other jobs).
torch.set_num_threads(1)
FRAME_SIZE = (416, 128)  # the default data set's (width, height)


@pytest.fixture(scope='module')
def tiny_frames(tmp_path_factory: pytest.TempPathFactory) -> train_depth.FrameSet:
    """18 frames at 104×32 written to a bag and read back, as training reads them."""
    path = tmp_path_factory.mktemp('tiny') / 'tiny_bag'
    config = SequenceConfig(seed=7, category='high_low', duration_s=0.3, width=104, height=32)
    write_sequence_bag(SyntheticSequence(config), path)
    return train_depth.load_frames([path], every=1, progress=False)


@pytest.mark.parametrize('kind', KINDS)
def test_nets_output_positive_depth_at_their_sizes(kind: str) -> None:
    torch.manual_seed(0)
    net = build_depth_net(kind).eval()
    width, height = net.input_size
    x = torch.randn(2, 3, height, width)
    with torch.inference_mode():
        log_depth = net.forward_log(x)
        depth = net(x)
    # The server net gets the full frame and predicts at 1/2; the lite net a quarter of it.
    assert net.input_size == ((416, 128) if kind == 'server' else (112, 32))
    assert log_depth.shape == ((2, 1, 64, 208) if kind == 'server' else (2, 1, 32, 112))
    assert depth.shape == (2, 1, height, width)
    assert torch.all(depth >= MIN_DEPTH_M)
    assert torch.all(depth <= MAX_DEPTH_M)

    frames = np.random.default_rng(0).integers(0, 256, (3, 128, 416, 3), dtype=np.uint8)
    predicted = net.predict(frames)
    assert predicted.shape == (3, 128, 416)
    assert predicted.dtype == np.float32
    assert np.all(predicted >= MIN_DEPTH_M)
    assert np.all(predicted <= MAX_DEPTH_M)
    single = net.predict(frames[1])
    assert single.shape == (128, 416)
    np.testing.assert_allclose(single, predicted[1], rtol=1e-5)


def test_predict_rejects_what_is_not_uint8_rgb() -> None:
    net = LiteDepthNet()
    with pytest.raises(ValueError, match='uint8'):
        net.predict(np.zeros((32, 104, 3), np.float32))
    with pytest.raises(ValueError, match='uint8'):
        net.predict(np.zeros((32, 104), np.uint8))


def test_lite_net_is_much_cheaper_than_the_server_net() -> None:
    server, lite = ServerDepthNet(), LiteDepthNet()
    assert count_parameters(lite) < 0.5 * count_parameters(server)
    # Each at its own input size, as AccuMO runs them.
    assert conv_macs(lite) < 0.1 * conv_macs(server)
    # Depthwise-separable: the lite net is cheaper than the server net at the same size too.
    assert conv_macs(lite, FRAME_SIZE) < 0.5 * conv_macs(server, FRAME_SIZE)


@pytest.mark.parametrize(('kind', 'input_size'), [('server', (104, 32)), ('lite', (52, 16))])
def test_a_few_training_steps_reduce_the_loss(
    tiny_frames: train_depth.FrameSet, kind: str, input_size: tuple[int, int]
) -> None:
    torch.manual_seed(0)
    net = build_depth_net(kind, input_size)
    result = train_depth.train_net(
        net,
        tiny_frames,
        minutes=5.0,
        max_steps=40,
        batch_size=6,
        lr=3e-3,
        seed=0,
        progress=False,
    )
    assert result.steps == 40
    assert result.epochs == pytest.approx(40 * 6 / 18)
    assert np.mean(result.losses[-5:]) < 0.7 * np.mean(result.losses[:5])
    assert result.last_losses < result.first_losses
    assert not net.training


def test_loss_is_zero_for_exact_depth_and_sees_scale() -> None:
    depth = torch.rand(2, 1, 8, 8) * 10.0 + 1.0
    assert float(train_depth.depth_loss(torch.log(depth), depth)) == pytest.approx(0.0, abs=1e-3)
    # A global scale error: SILog alone would charge only 15 % of it; the L1 term all of it.
    assert float(train_depth.depth_loss(torch.log(depth * 1.2), depth)) > np.log(1.2)


def test_lr_schedule_warms_up_then_anneals() -> None:
    assert train_depth.lr_factor(0.0) == pytest.approx(0.1)
    assert train_depth.lr_factor(train_depth.WARMUP_SHARE) == pytest.approx(1.0)
    assert train_depth.lr_factor(0.5) < 1.0
    assert train_depth.lr_factor(1.0) == pytest.approx(train_depth.FINAL_LR_SHARE)


def _perturbed_lite_net() -> LiteDepthNet:
    """Return a lite net whose weights and BN statistics differ from a fresh one's."""
    torch.manual_seed(1)
    net = LiteDepthNet()
    with torch.no_grad():
        for name, tensor in net.state_dict().items():
            if tensor.is_floating_point() and 'mean' not in name and 'std' not in name:
                tensor.add_(0.01 * torch.randn_like(tensor))
    return net


def test_save_then_load_gives_identical_outputs(tmp_path) -> None:  # noqa: ANN001
    net = _perturbed_lite_net()
    path = tmp_path / 'depth_lite.pt'
    save_depth_weights(net, path, weights_metadata(net, 'lite', note='test'))
    loaded = load_depth_net('lite', path)
    assert not loaded.training
    assert loaded.metadata['note'] == 'test'
    frames = np.random.default_rng(1).integers(0, 256, (2, 128, 416, 3), dtype=np.uint8)
    np.testing.assert_array_equal(loaded.predict(frames), net.predict(frames))
    metadata, state_dict = read_depth_weights(path)
    assert metadata['architecture'] == LiteDepthNet.architecture
    assert set(state_dict) == set(net.state_dict())


def test_mismatched_or_missing_weights_give_clear_errors(tmp_path) -> None:  # noqa: ANN001
    net = LiteDepthNet()
    path = tmp_path / 'lite.pt'
    save_depth_weights(net, path, weights_metadata(net, 'lite'))
    with pytest.raises(DepthWeightsError, match='architecture'):
        load_depth_net('server', path)

    resized = tmp_path / 'resized.pt'
    save_depth_weights(net, resized, {**weights_metadata(net, 'lite'), 'input_size': [224, 64]})
    with pytest.raises(DepthWeightsError, match='input_size'):
        load_depth_net('lite', resized)

    foreign = tmp_path / 'foreign.pt'
    torch.save(net.state_dict(), foreign)
    with pytest.raises(DepthWeightsError, match='not an AccuMO depth weights file'):
        load_depth_net('lite', foreign)

    with pytest.raises(FileNotFoundError, match='accumo_train_depth --dataset'):
        load_depth_net('server', tmp_path / 'missing.pt')
    with pytest.raises(ValueError, match='unknown depth net kind'):
        load_depth_net('huge', path)


def test_cli_trains_evaluates_and_writes_loadable_weights(tmp_path, capsys) -> None:  # noqa: ANN001
    folder = tmp_path / 'data'
    arguments = ['--output', str(folder), '--categories', 'low_low', '--per-category', '2']
    arguments += ['--duration', '0.2', '--width', '104', '--height', '32', '--workers', '1']
    assert dataset.main(arguments) == 0
    output = tmp_path / 'weights' / 'depth_lite.pt'
    argv = ['--dataset', str(folder), '--kind', 'lite', '--minutes', '1', '--max-steps', '4']
    argv += ['--batch-size', '4', '--eval-every', '3', '--threads', '1']
    argv += ['--output', str(output), '--no-progress']
    assert train_depth.main(argv) == 0
    printed = capsys.readouterr().out
    assert 'baseline: median' in printed
    assert 'lite net' in printed

    net = load_depth_net('lite', output)
    metadata = net.metadata
    assert metadata['training_command'] == 'accumo_train_depth ' + ' '.join(argv)
    assert metadata['training']['steps'] == 4
    assert metadata['dataset']['heldout_sequences'] == [
        {'name': 'low_low_1', 'seed': 1, 'category': 'low_low'}
    ]
    assert metadata['heldout']['frames'] == 4  # 12 frames, every 3rd
    assert metadata['dataset']['generator']['duration_s'] == 0.2
    assert metadata['dataset']['generator']['width'] == 104
    assert metadata['heldout']['median_depth_m'] > 0.0
    assert 0.0 < metadata['heldout']['abs_rel'] < 10.0
    report = yaml.safe_load(output.with_suffix('.yaml').read_text())
    assert report['heldout']['abs_rel'] == metadata['heldout']['abs_rel']
    assert set(report['baselines']) == {'median', 'pixel_median'}

    assert train_depth.main([*argv, '--every', '0']) == 2


def _tiny_set(folder, *extra: str) -> None:  # noqa: ANN001
    arguments = ['--output', str(folder), '--categories', 'low_low', '--per-category', '2']
    arguments += ['--duration', '0.2', '--height', '32', '--workers', '1', *extra]
    assert dataset.main(arguments) == 0


def test_cli_trains_on_extra_training_only_sets_and_refuses_leaks(tmp_path, capsys) -> None:  # noqa: ANN001
    _tiny_set(tmp_path / 'data', '--width', '104')
    _tiny_set(tmp_path / 'rooms', '--width', '104', '--seed', '1', '--holdout', 'none')
    output = tmp_path / 'depth_lite.pt'
    argv = ['--dataset', str(tmp_path / 'data'), '--kind', 'lite', '--minutes', '1']
    argv += ['--max-steps', '2', '--batch-size', '4', '--threads', '1', '--no-progress']
    argv += ['--output', str(output)]
    assert train_depth.main([*argv, '--extra-train', str(tmp_path / 'rooms')]) == 0
    # 12 train frames every 3rd, plus 2 × 12 extra frames every one.
    assert '28 train frames from 3 sequences' in capsys.readouterr().out
    metadata = load_depth_net('lite', output).metadata
    assert metadata['training']['frames'] == 28
    assert metadata['dataset']['extra_train'] == [
        {
            'folder': 'rooms',
            'seed': 1,
            'generator': metadata['dataset']['generator'],
            'sequences': 2,
            'seeds': [1000, 1001],
            'every': 1,
        }
    ]

    # A training-only set with the data set's seeds holds its held-out sequence (seed 1) ...
    _tiny_set(tmp_path / 'leaky', '--width', '104', '--holdout', 'none')
    assert train_depth.main([*argv, '--extra-train', str(tmp_path / 'leaky')]) == 2
    assert 'held-out sequences (seeds [1])' in capsys.readouterr().err
    # ... and one at another image size cannot be trained on with it.
    _tiny_set(tmp_path / 'wide', '--width', '112', '--seed', '2', '--holdout', 'none')
    assert train_depth.main([*argv, '--extra-train', str(tmp_path / 'wide')]) == 2
    assert '112x32 frames, the data set 104x32' in capsys.readouterr().err
    assert train_depth.main([*argv, '--extra-train', str(tmp_path / 'missing')]) == 2
    assert 'does not exist' in capsys.readouterr().err


def _regenerated_heldout_frames(metadata: dict) -> tuple[np.ndarray, np.ndarray]:
    """Render frames on the evaluated grid of the held-out sequences named in ``metadata``."""
    generator = metadata['dataset']['generator']
    every = metadata['heldout']['every']
    rgb, truth = [], []
    for entry in metadata['dataset']['heldout_sequences']:
        config = SequenceConfig(seed=entry['seed'], category=entry['category'], **generator)
        sequence = SyntheticSequence(config)
        for share in (0.25, 0.75):
            index = every * round(share * (config.frame_count - 1) / every)
            rendered = sequence.frame(index).rendered
            rgb.append(rendered.rgb)
            truth.append(rendered.depth)
    return np.stack(rgb), np.stack(truth)


@pytest.mark.parametrize('kind', KINDS)
def test_committed_weights_are_accurate_on_regenerated_heldout_frames(kind: str) -> None:
    """Regenerate a few evaluated frames of the held-out sequences; score the packaged weights."""
    path = default_weights_path(kind)
    assert path.is_file()
    assert path.stat().st_size < 8e6  # a few MB, committed with the code
    net = load_depth_net(kind)
    metadata = net.metadata
    recorded = metadata['heldout']
    rgb, truth = _regenerated_heldout_frames(metadata)
    errors = depth_errors(net.predict(rgb), truth)
    median = depth_errors(np.full_like(truth, recorded['median_depth_m']), truth)
    # Eight frames are a noisy sample of the held-out split: a generous margin on its AbsRel,
    # and a clear win over the trivial median-depth predictor on the same frames.
    assert errors.abs_rel < 1.5 * recorded['abs_rel'] + 0.05
    assert errors.abs_rel < 0.8 * median.abs_rel


def test_committed_server_net_is_better_than_the_lite_net() -> None:
    server, lite = load_depth_net('server'), load_depth_net('lite')
    assert server.metadata['dataset'] == lite.metadata['dataset']
    # On the recorded held-out split (AbsRel 0.053 against 0.096, RMSE 0.54 m against
    # 1.03 m) ...
    assert server.metadata['heldout']['abs_rel'] < 0.75 * lite.metadata['heldout']['abs_rel']
    assert server.metadata['heldout']['rmse'] < 0.75 * lite.metadata['heldout']['rmse']
    # ... and on frames regenerated here.
    rgb, truth = _regenerated_heldout_frames(server.metadata)
    server_errors = depth_errors(server.predict(rgb), truth)
    lite_errors = depth_errors(lite.predict(rgb), truth)
    # Eight frames (here AbsRel 0.058 against 0.095, RMSE 0.54 m against 1.08 m).
    assert server_errors.abs_rel < lite_errors.abs_rel
    assert server_errors.rmse < lite_errors.rmse
    assert server_errors.delta1 > lite_errors.delta1


def test_frames_round_trip_through_a_bag(tmp_path) -> None:  # noqa: ANN001
    config = SequenceConfig(seed=3, duration_s=0.1, width=52, height=16)
    path = tmp_path / 'bag'
    write_sequence_bag(SyntheticSequence(config), path)
    frames = train_depth.load_frames([path], every=2, progress=False)
    loaded = read_sequence_bag(path, every=2)
    assert frames.rgb.dtype == torch.uint8
    assert frames.depth.dtype == torch.float16
    np.testing.assert_array_equal(frames.rgb.numpy(), loaded.rgb)
    np.testing.assert_allclose(frames.depth.float().numpy(), loaded.depth, rtol=1e-3)
    assert frames.sequences == ['bag']
    assert frames.sequence_index.tolist() == [0, 0, 0]
