"""Distance, GeoHash, S2Id and S2AreaInKm2.

Distance is Dagger's haversine written as built-in expressions, with Dagger's operation order
(`deg * PI / 180`, not `radians()`), so it gives the JVM's bits. The cell functions are JVM functions
(`GeoFunctions.java`) on the libraries Dagger itself calls: davidmoten's geo and Google's S2.
"""

from __future__ import annotations

from jobs.udfs.registration import FunctionSet

EARTH_RADIUS_KM = 6371
_JAVA = "dagger.jobs.udfs.GeoFunctions"


def _radians(degrees: str) -> str:
    return f"({degrees}) * pi() / 180"


def haversine_sql(lat1: str, lon1: str, lat2: str, lon2: str) -> str:
    """Dagger's Distance as a Spark SQL expression over four DOUBLE expressions (kilometres)."""
    half_lat = f"sin({_radians(f'{lat2} - {lat1}')} / 2)"
    half_lon = f"sin({_radians(f'{lon2} - {lon1}')} / 2)"
    a = f"({half_lat} * {half_lat} + cos({_radians(lat1)}) * cos({_radians(lat2)}) * {half_lon} * {half_lon})"
    return f"{EARTH_RADIUS_KM} * (2 * atan2(sqrt({a}), sqrt(1 - {a})))"


def declare(functions: FunctionSet) -> None:
    functions.sql(
        "Distance",
        "latitude1 DOUBLE, longitude1 DOUBLE, latitude2 DOUBLE, longitude2 DOUBLE",
        "DOUBLE",
        haversine_sql("latitude1", "longitude1", "latitude2", "longitude2"),
    )
    functions.jvm("GeoHash", f"{_JAVA}$Geohash", "string")
    functions.jvm("S2Id", f"{_JAVA}$S2Id", "string")
    functions.jvm("S2AreaInKm2", f"{_JAVA}$S2AreaInKm2", "double")
