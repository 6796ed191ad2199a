# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Textured box worlds and an exact ray caster for RGB, metric depth and object ids.

A scene is a room (a box seen from inside: floor, walls, ceiling), static boxes and moving
boxes, each with a procedural texture. Rendering casts one ray per pixel centre and
intersects every box exactly (slab test), so depth is exact up to float32 and a static
point has the same colour from every viewpoint (Lambertian shading with per-face normals;
texture level of detail picked from the pixel footprint against aliasing). That makes the
frames valid ground truth for depth warping, optical flow and visual odometry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy.ndimage import gaussian_filter

from accumo_ros.geometry import R_BODY_OPTICAL
from edge_offload.camera_model import PinholeCamera

TEXTURE_SIZE = 256
SUN_DIRECTION = np.array([0.45, 0.3, 0.84]) / np.linalg.norm([0.45, 0.3, 0.84])
AMBIENT = 0.45

# A moving box's pose at time t: (yaw in rad, centre (3,) in the world).
Motion = Callable[[float], tuple[float, np.ndarray]]


@dataclass
class Box:
    """An oriented box (yaw only) with a texture; ``inside`` for the room around the camera."""

    center: np.ndarray
    half_extents: np.ndarray
    yaw: float
    albedo: np.ndarray  # RGB in [0, 1]
    texture: int  # index into the scene's texture bank
    texel_m: float  # size of one texel on the surface, metres
    inside: bool = False
    motion: Motion | None = None
    name: str = ''

    @property
    def dynamic(self) -> bool:
        """Whether the box moves."""
        return self.motion is not None

    def pose_at(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """Rotation (box to world) and centre at time ``t``."""
        yaw, center = (self.yaw, self.center) if self.motion is None else self.motion(t)
        c, s = np.cos(yaw), np.sin(yaw)
        return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]), np.asarray(center)


@dataclass
class Scene:
    """Boxes and the texture bank they index (each texture a mip pyramid of grey levels)."""

    boxes: list[Box]
    textures: list[list[np.ndarray]] = field(default_factory=list)

    @property
    def dynamic_ids(self) -> np.ndarray:
        """Object ids (indices into ``boxes``) of the moving boxes."""
        return np.array([i for i, box in enumerate(self.boxes) if box.dynamic], dtype=np.int16)


def make_texture_bank(rng: np.random.Generator, count: int) -> list[list[np.ndarray]]:
    """Tileable multi-octave noise textures in [0.35, 1], each with its mip pyramid."""
    bank = []
    for index in range(count):
        image = np.zeros((TEXTURE_SIZE, TEXTURE_SIZE))
        for sigma, weight in ((24.0, 1.0), (8.0, 0.7), (2.5, 0.5), (0.8, 0.35)):
            noise = gaussian_filter(rng.random((TEXTURE_SIZE, TEXTURE_SIZE)), sigma, mode='wrap')
            image += weight * (noise - noise.mean()) / (noise.std() + 1e-9)
        if index % 3 == 1:  # some surfaces get tiles or planks: strong straight edges
            period = int(rng.integers(16, 48))
            lines = (np.arange(TEXTURE_SIZE) % period) < 2
            image[lines, :] -= 2.5
            if index % 2:
                image[:, lines] -= 2.5
        image = (image - image.min()) / (image.max() - image.min())
        level = 0.35 + 0.65 * image
        pyramid = [level]
        while pyramid[-1].shape[0] > 1:
            top = pyramid[-1]
            pyramid.append(
                0.25 * (top[0::2, 0::2] + top[1::2, 0::2] + top[0::2, 1::2] + top[1::2, 1::2])
            )
        bank.append([np.asarray(p, dtype=np.float32) for p in pyramid])
    return bank


@dataclass(frozen=True)
class RenderedFrame:
    """One rendered view."""

    rgb: np.ndarray  # (H, W, 3) uint8
    depth: np.ndarray  # (H, W) float32, metres (optical z)
    object_id: np.ndarray  # (H, W) int16, index of the box seen at each pixel

    def dynamic_mask(self, scene: Scene) -> np.ndarray:
        """Pixels that show a moving box."""
        return np.isin(self.object_id, scene.dynamic_ids)


class Renderer:
    """Ray-cast a :class:`Scene` through a pinhole camera mounted at the body origin."""

    def __init__(self, scene: Scene, intrinsics: PinholeCamera) -> None:
        self.scene = scene
        self.intrinsics = intrinsics
        rays = intrinsics.pixel_rays().reshape(-1, 3)
        self._rays_body = rays @ R_BODY_OPTICAL.T
        # Half-angle of the cone around the optical axis that holds every pixel ray.
        self._cos_half_fov = float(np.min(rays[:, 2] / np.linalg.norm(rays, axis=1)))
        # Pixel footprint per metre of depth, for the texture level of detail.
        self._footprint_per_m = 1.0 / intrinsics.fx

    def render(self, pose_world_body: np.ndarray, t: float) -> RenderedFrame:
        """Render the scene at time ``t`` from the body pose ``T_world_body``."""
        height, width = self.intrinsics.height, self.intrinsics.width
        origin = pose_world_body[:3, 3]
        directions = self._rays_body @ pose_world_body[:3, :3].T
        directions_rows = np.ascontiguousarray(directions.T, dtype=np.float32)
        forward = pose_world_body[:3, 0]
        count = len(directions)
        best_t = np.full(count, np.inf)
        best_id = np.full(count, -1, dtype=np.int16)
        hits = []
        for index, box in enumerate(self.scene.boxes):
            if not box.inside and _outside_view(box, t, origin, forward, self._cos_half_fov):
                continue
            hit = _intersect(box, t, origin, directions_rows)
            if hit is None:
                continue
            t_hit, pixels = hit
            closer = t_hit < best_t[pixels]
            pixels, t_hit = pixels[closer], t_hit[closer]
            best_t[pixels] = t_hit
            best_id[pixels] = index
            hits.append(index)
        if np.any(best_id < 0):
            raise RuntimeError('a ray left the scene: the camera is outside the room')
        rgb = np.empty((count, 3), dtype=np.float32)
        for index in hits:
            pixels = np.flatnonzero(best_id == index)
            if len(pixels):
                rgb[pixels] = self._shade(
                    self.scene.boxes[index], t, origin, directions[pixels], best_t[pixels]
                )
        # Depth is the optical z; rays have optical z = 1, so the ray parameter is the depth.
        return RenderedFrame(
            rgb=np.clip(rgb * 255.0 + 0.5, 0, 255).astype(np.uint8).reshape(height, width, 3),
            depth=best_t.astype(np.float32).reshape(height, width),
            object_id=best_id.reshape(height, width),
        )

    def _shade(
        self,
        box: Box,
        t: float,
        origin: np.ndarray,
        directions: np.ndarray,
        depth: np.ndarray,
    ) -> np.ndarray:
        rotation, center = box.pose_at(t)
        local = (origin - center) @ rotation + depth[:, None] * (directions @ rotation)
        scaled = np.abs(local) / box.half_extents
        axis = np.argmax(scaled, axis=1)  # the face a point lies on
        sign = np.sign(local[np.arange(len(local)), axis])
        normal_local = np.zeros_like(local)
        normal_local[np.arange(len(local)), axis] = -sign if box.inside else sign
        normal_world = normal_local @ rotation.T
        # Face coordinates: the two axes other than the face normal.
        first = np.where(axis == 0, local[:, 1], local[:, 0])
        second = np.where(axis == 2, local[:, 1], local[:, 2])
        ray_norm = np.linalg.norm(directions, axis=1)
        cosine = np.abs(np.einsum('ij,ij->i', normal_world, directions)) / ray_norm
        footprint_m = depth * ray_norm * self._footprint_per_m / np.maximum(cosine, 0.05)
        pyramid = self.scene.textures[box.texture]
        levels = np.clip(
            np.floor(np.log2(np.maximum(footprint_m / box.texel_m, 1.0))), 0, len(pyramid) - 1
        ).astype(int)
        grey = np.empty(len(local), dtype=np.float32)
        for level in np.unique(levels):
            chosen = levels == level
            texture = pyramid[level]
            size = texture.shape[0]
            texel = box.texel_m * (1 << int(level))
            # Offset by the face so that opposite faces do not mirror each other.
            row = np.floor(first[chosen] / texel + 37 * axis[chosen]).astype(int) % size
            col = np.floor(second[chosen] / texel + 11 * axis[chosen]).astype(int) % size
            grey[chosen] = texture[row, col]
        light = AMBIENT + (1.0 - AMBIENT) * np.clip(normal_world @ SUN_DIRECTION, 0.0, 1.0)
        return (grey * light)[:, None] * box.albedo[None, :]


def _intersect(
    box: Box, t: float, origin: np.ndarray, directions: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """Ray parameters and ray indices of the rays that hit ``box`` (slab test).

    ``directions`` is (3, N) float32, one row per world axis (contiguous rows are several
    times faster than (N, 3) here). Boxes only rotate about z, so the rotation into the box
    frame mixes x and y only.
    """
    rotation, center = box.pose_at(t)
    cos_yaw, sin_yaw = rotation[0, 0], rotation[1, 0]
    offset = origin - center
    origin_local = offset @ rotation
    local = (
        cos_yaw * directions[0] + sin_yaw * directions[1],
        cos_yaw * directions[1] - sin_yaw * directions[0],
        directions[2],
    )
    t_enter = t_exit = None
    for axis in range(3):
        component = local[axis]
        # A ray parallel to a slab: a tiny component gives +-huge, the right limit.
        component = np.where(np.abs(component) < 1e-12, np.float32(1e-12), component)
        inverse = np.float32(1.0) / component
        near = (-box.half_extents[axis] - origin_local[axis]) * inverse
        far = (box.half_extents[axis] - origin_local[axis]) * inverse
        low, high = np.minimum(near, far), np.maximum(near, far)
        t_enter = low if t_enter is None else np.maximum(t_enter, low)
        t_exit = high if t_exit is None else np.minimum(t_exit, high)
    if box.inside:
        pixels = np.flatnonzero((t_exit > 0.0) & (t_enter <= 0.0))
        return t_exit[pixels].astype(np.float64), pixels
    pixels = np.flatnonzero((t_exit >= t_enter) & (t_enter > 1e-3))
    if not len(pixels):
        return None
    return t_enter[pixels].astype(np.float64), pixels


def _outside_view(
    box: Box, t: float, origin: np.ndarray, forward: np.ndarray, cos_half_fov: float
) -> bool:
    """Whether the box's bounding sphere lies wholly outside the camera's view cone."""
    _, center = box.pose_at(t)
    to_center = center - origin
    distance = float(np.linalg.norm(to_center))
    radius = float(np.linalg.norm(box.half_extents))
    if distance <= radius:
        return False
    cone = np.arccos(np.clip(cos_half_fov, -1.0, 1.0))
    angle = np.arccos(np.clip(to_center @ forward / distance, -1.0, 1.0))
    return angle - np.arcsin(radius / distance) > cone
