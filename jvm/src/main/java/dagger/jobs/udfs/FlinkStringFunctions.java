package dagger.jobs.udfs;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.api.java.UDF3;

/**
 * Flink's string functions that Spark lacks or means otherwise, with Flink's semantics, for the Flink-SQL
 * translator's calls ({@code jobs/raystack/flink_sql/functions.toml}). A NULL argument gives NULL.
 *
 * <ul>
 *   <li>{@code SPLIT_INDEX(s, separator, i)}: the {@code i}-th (from 0) part of {@code s} cut at each
 *       occurrence of the whole {@code separator} (a literal, not a pattern), empty parts kept; an empty
 *       separator cuts at each white-space character. NULL for a negative index, one past the last part,
 *       or an empty string (which has no parts). Spark's {@code split_part} counts from 1 and gives ''
 *       out of range.
 *   <li>{@code INITCAP(s)}: words are runs of ASCII letters and digits; a word's first letter is upper
 *       case and its other letters lower case; every other character is kept and ends a word. Spark's
 *       {@code initcap} cuts words at white space only.
 * </ul>
 */
public final class FlinkStringFunctions {
  private FlinkStringFunctions() {}

  /** The parts of {@code text} between the separators, empty ones included. */
  static List<String> parts(String text, String separator) {
    List<String> parts = new ArrayList<>();
    if (text.isEmpty()) {
      return parts;
    }
    int start = 0;
    if (separator.isEmpty()) {
      for (int index = 0; index < text.length(); index++) {
        if (Character.isWhitespace(text.charAt(index))) {
          parts.add(text.substring(start, index));
          start = index + 1;
        }
      }
    } else {
      for (int found = text.indexOf(separator); found >= 0; found = text.indexOf(separator, start)) {
        parts.add(text.substring(start, found));
        start = found + separator.length();
      }
    }
    parts.add(text.substring(start));
    return parts;
  }

  static boolean isWordCharacter(char character) {
    return (character >= 'a' && character <= 'z')
        || (character >= 'A' && character <= 'Z')
        || (character >= '0' && character <= '9');
  }

  /** SPLIT_INDEX(s, separator, i). */
  public static final class SplitIndex implements UDF3<String, String, Integer, String> {
    @Override
    public String call(String text, String separator, Integer index) {
      if (text == null || separator == null || index == null || index < 0) {
        return null;
      }
      List<String> parts = parts(text, separator);
      return index < parts.size() ? parts.get(index) : null;
    }
  }

  /** INITCAP(s). */
  public static final class InitCap implements UDF1<String, String> {
    @Override
    public String call(String text) {
      if (text == null) {
        return null;
      }
      StringBuilder result = new StringBuilder(text.length());
      boolean inWord = false;
      for (int index = 0; index < text.length(); index++) {
        char character = text.charAt(index);
        if (!isWordCharacter(character)) {
          inWord = false;
          result.append(character);
        } else {
          result.append(inWord ? Character.toLowerCase(character) : Character.toUpperCase(character));
          inWord = true;
        }
      }
      return result.toString();
    }
  }
}
