package dagger.jobs.udfs;

import com.github.davidmoten.geo.GeoHash;
import com.google.common.geometry.S2Cell;
import com.google.common.geometry.S2CellId;
import com.google.common.geometry.S2LatLng;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.api.java.UDF3;

/**
 * Dagger's cell functions in the JVM, on the libraries Dagger itself calls (davidmoten's geo for
 * geohashes, Google's S2 for cells), so that a query calling them keeps its records in the JVM and can
 * run in real-time mode. Arguments are any SQL numbers (a literal such as {@code -6.17} is a DECIMAL); a
 * NULL argument gives NULL, and a value out of range fails the query naming the function.
 */
public final class GeoFunctions {
  static final int MAX_GEOHASH_LENGTH = 12;
  static final int MAX_S2_LEVEL = 30;
  /** Dagger's S2AreaInKm2: a cell's steradians times the Earth's area over the sphere's (4 pi). */
  static final double EARTH_AREA_KM2 = 510072000;

  private GeoFunctions() {}

  /** {@code GeoHash(latitude, longitude, length)}: the cell's geohash, latitude first. */
  public static final class Geohash implements UDF3<Object, Object, Object, String> {
    private static final long serialVersionUID = 1L;

    @Override
    public String call(Object latitude, Object longitude, Object length) {
      if (latitude == null || longitude == null || length == null) {
        return null;
      }
      double lat = number(latitude);
      long size = ((Number) length).longValue();
      if (size < 1 || size > MAX_GEOHASH_LENGTH) {
        throw new IllegalArgumentException(
            "GeoHash: length must be between 1 and " + MAX_GEOHASH_LENGTH + ", got " + size);
      }
      if (!(lat >= -90 && lat <= 90)) {
        throw new IllegalArgumentException(
            "GeoHash: latitude must be between -90 and 90 inclusive, got " + lat);
      }
      return GeoHash.encodeHash(lat, number(longitude), (int) size);
    }
  }

  /** {@code S2Id(latitude, longitude, level)}: the S2 cell id as Java's signed {@code long} prints it. */
  public static final class S2Id implements UDF3<Object, Object, Object, String> {
    private static final long serialVersionUID = 1L;

    @Override
    public String call(Object latitude, Object longitude, Object level) {
      if (latitude == null || longitude == null || level == null) {
        return null;
      }
      long depth = ((Number) level).longValue();
      if (depth < 0 || depth > MAX_S2_LEVEL) {
        throw new IllegalArgumentException(
            "S2Id: level must be between 0 and " + MAX_S2_LEVEL + ", got " + depth);
      }
      S2LatLng point = S2LatLng.fromDegrees(number(latitude), number(longitude));
      return Long.toString(S2CellId.fromLatLng(point).parent((int) depth).id());
    }
  }

  /** {@code S2AreaInKm2(s2id)}: the cell's exact area in square kilometres. */
  public static final class S2AreaInKm2 implements UDF1<String, Double> {
    private static final long serialVersionUID = 1L;

    @Override
    public Double call(String cellId) {
      if (cellId == null) {
        return null;
      }
      S2CellId cell;
      try {
        String digits = cellId.trim(); // an id prints signed in Java, unsigned elsewhere: take both
        cell = new S2CellId(digits.startsWith("-") ? Long.parseLong(digits) : Long.parseUnsignedLong(digits));
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException(
            "S2AreaInKm2: '" + cellId + "' is not a number (an S2 cell id in decimal)", e);
      }
      if (!cell.isValid()) {
        throw new IllegalArgumentException("S2AreaInKm2: '" + cellId + "' is not a valid S2 cell id");
      }
      return new S2Cell(cell).exactArea() * EARTH_AREA_KM2 / (4 * Math.PI);
    }
  }

  private static double number(Object value) {
    return ((Number) value).doubleValue();
  }
}
