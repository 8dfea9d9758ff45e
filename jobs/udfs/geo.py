"""Distance, GeoHash, S2Id and S2AreaInKm2.

Distance is Dagger's haversine written as built-in expressions, with Dagger's operation order
(`deg * PI / 180`, not `radians()`), so it gives the JVM's bits. The cell functions call the libraries:
pygeohash (the same bisection as Dagger's davidmoten geo) and s2geometry (Google's S2 itself).
"""

from __future__ import annotations

import math

import pyarrow as pa
import pygeohash
import s2geometry

from jobs.udfs.registration import FunctionSet, UdfError, floats, ints

EARTH_RADIUS_KM = 6371
# Dagger's S2AreaInKm2: a cell's steradians times the Earth's area over the sphere's (4 pi).
EARTH_AREA_KM2 = 510072000
MAX_GEOHASH_LENGTH = 12
MAX_S2_LEVEL = 30


def _radians(degrees: str) -> str:
    return f"({degrees}) * pi() / 180"


def haversine_sql(lat1: str, lon1: str, lat2: str, lon2: str) -> str:
    """Dagger's Distance as a Spark SQL expression over four DOUBLE expressions (kilometres)."""
    half_lat = f"sin({_radians(f'{lat2} - {lat1}')} / 2)"
    half_lon = f"sin({_radians(f'{lon2} - {lon1}')} / 2)"
    a = f"({half_lat} * {half_lat} + cos({_radians(lat1)}) * cos({_radians(lat2)}) * {half_lon} * {half_lon})"
    return f"{EARTH_RADIUS_KM} * (2 * atan2(sqrt({a}), sqrt(1 - {a})))"


def _to180(longitude: float) -> float:
    """Longitude folded into [-180, 180] the way Dagger's geohash library does (symmetric about 0)."""
    magnitude = abs(longitude)
    if magnitude > 180:
        magnitude -= math.floor((magnitude + 180) / 360) * 360
    return -magnitude if longitude < 0 else magnitude


def geohash(latitude: pa.Array, longitude: pa.Array, length: pa.Array) -> pa.Array:
    hashes: list[str | None] = []
    for lat, lon, size in zip(floats(latitude), floats(longitude), ints(length), strict=True):
        if lat is None or lon is None or size is None:
            hashes.append(None)
            continue
        if not 1 <= size <= MAX_GEOHASH_LENGTH:
            raise UdfError(f"GeoHash: length must be between 1 and {MAX_GEOHASH_LENGTH}, got {size}")
        if not -90 <= lat <= 90:
            raise UdfError(f"GeoHash: latitude must be between -90 and 90 inclusive, got {lat}")
        hashes.append(pygeohash.encode(lat, _to180(lon), size))
    return pa.array(hashes, pa.string())


def _signed(cell_id: int) -> int:
    """Java's long: ids of faces 4 and 5 have the top bit set and print negative in Dagger."""
    return cell_id - (1 << 64) if cell_id >= 1 << 63 else cell_id


def s2_id(latitude: pa.Array, longitude: pa.Array, level: pa.Array) -> pa.Array:
    ids: list[str | None] = []
    for lat, lon, depth in zip(floats(latitude), floats(longitude), ints(level), strict=True):
        if lat is None or lon is None or depth is None:
            ids.append(None)
            continue
        if not 0 <= depth <= MAX_S2_LEVEL:
            raise UdfError(f"S2Id: level must be between 0 and {MAX_S2_LEVEL}, got {depth}")
        leaf = s2geometry.S2CellId(s2geometry.S2LatLng.FromDegrees(lat, lon))
        ids.append(str(_signed(leaf.parent(depth).id())))
    return pa.array(ids, pa.string())


def s2_area_km2(cell_ids: pa.Array) -> pa.Array:
    areas: list[float | None] = []
    for text in cell_ids.to_pylist():
        if text is None:
            areas.append(None)
            continue
        try:
            cell_id = s2geometry.S2CellId(int(text) & ((1 << 64) - 1))
        except ValueError:
            raise UdfError(f"S2AreaInKm2: {text!r} is not a number (an S2 cell id in decimal)") from None
        if not cell_id.is_valid():
            raise UdfError(f"S2AreaInKm2: {text!r} is not a valid S2 cell id")
        areas.append(s2geometry.S2Cell(cell_id).ExactArea() * EARTH_AREA_KM2 / (4 * math.pi))
    return pa.array(areas, pa.float64())


def declare(functions: FunctionSet) -> None:
    functions.sql(
        "Distance",
        "latitude1 DOUBLE, longitude1 DOUBLE, latitude2 DOUBLE, longitude2 DOUBLE",
        "DOUBLE",
        haversine_sql("latitude1", "longitude1", "latitude2", "longitude2"),
    )
    functions.arrow("GeoHash", geohash, "string")
    functions.arrow("S2Id", s2_id, "string")
    functions.arrow("S2AreaInKm2", s2_area_km2, "double")
