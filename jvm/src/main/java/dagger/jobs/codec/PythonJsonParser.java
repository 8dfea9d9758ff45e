package dagger.jobs.codec;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * JSON text as Python's json module reads it: RFC 8259 plus NaN, Infinity and -Infinity, every number a
 * Double, a duplicate key an error (as {@code json_format.Parse} makes it). Objects keep their keys'
 * order. Errors read as Python's ({@code Expecting value (char 3)}).
 */
final class PythonJsonParser {
  /** JSON's null, apart from Java's, which stands for no value. */
  static final Object NULL = new Object();

  private static final int MAX_DEPTH = 100;
  private final String text;
  private int at;
  private int depth;

  /** Text that is not JSON, or JSON the caller does not take. */
  static final class JsonError extends RuntimeException {
    private static final long serialVersionUID = 1L;

    JsonError(String message) {
      super(message, null, false, false);
    }
  }

  private PythonJsonParser(String text) {
    this.text = text;
  }

  /** The text's one JSON value: a Map, a List, a String, a Double, a Boolean or {@link #NULL}. */
  static Object parse(String text) {
    return new PythonJsonParser(text).document();
  }

  private Object document() {
    skipSpace();
    Object parsed = value();
    skipSpace();
    if (at < text.length()) {
      throw error("Extra data");
    }
    return parsed;
  }

  private JsonError error(String what) {
    return new JsonError("Failed to load JSON: " + what + " (char " + at + ")");
  }

  private void skipSpace() {
    while (at < text.length() && " \t\n\r".indexOf(text.charAt(at)) >= 0) {
      at++;
    }
  }

  private Object value() {
    if (at >= text.length()) {
      throw error("Expecting value");
    }
    char c = text.charAt(at);
    switch (c) {
      case '{':
        return object();
      case '[':
        return array();
      case '"':
        return string();
      default:
        break;
    }
    for (String word : new String[] {"null", "true", "false", "NaN", "Infinity", "-Infinity"}) {
      if (text.startsWith(word, at)) {
        at += word.length();
        return switch (word) {
          case "null" -> NULL;
          case "true" -> Boolean.TRUE;
          case "false" -> Boolean.FALSE;
          case "NaN" -> Double.NaN;
          case "Infinity" -> Double.POSITIVE_INFINITY;
          default -> Double.NEGATIVE_INFINITY;
        };
      }
    }
    return number();
  }

  private void enter() {
    if (++depth > MAX_DEPTH) {
      throw error("nested deeper than " + MAX_DEPTH + " levels");
    }
  }

  private Map<String, Object> object() {
    enter();
    at++; // {
    Map<String, Object> object = new LinkedHashMap<>();
    skipSpace();
    if (closes('}')) {
      return object;
    }
    do {
      skipSpace();
      if (at >= text.length() || text.charAt(at) != '"') {
        throw error("Expecting property name enclosed in double quotes");
      }
      String key = string();
      skipSpace();
      if (!take(':')) {
        throw error("Expecting ':' delimiter");
      }
      skipSpace();
      if (object.containsKey(key)) {
        throw error("duplicate key " + key);
      }
      object.put(key, value());
    } while (continues('}'));
    return object;
  }

  private List<Object> array() {
    enter();
    at++; // [
    List<Object> array = new ArrayList<>();
    skipSpace();
    if (closes(']')) {
      return array;
    }
    do {
      skipSpace();
      array.add(value());
    } while (continues(']'));
    return array;
  }

  /** Takes the next character when it is {@code c}. */
  private boolean take(char c) {
    if (at < text.length() && text.charAt(at) == c) {
      at++;
      return true;
    }
    return false;
  }

  /** Takes {@code close} when it comes next, leaving the object or array it ends. */
  private boolean closes(char close) {
    if (!take(close)) {
      return false;
    }
    depth--;
    return true;
  }

  /** After an item: true on a comma (another item follows), false on {@code close}, an error otherwise. */
  private boolean continues(char close) {
    skipSpace();
    if (take(',')) {
      return true;
    }
    if (closes(close)) {
      return false;
    }
    throw error("Expecting ',' delimiter");
  }

  private String string() {
    at++; // "
    StringBuilder out = new StringBuilder();
    while (true) {
      if (at >= text.length()) {
        throw error("Unterminated string");
      }
      char c = text.charAt(at++);
      if (c == '"') {
        return out.toString();
      }
      if (c < 0x20) {
        at--;
        throw error("Invalid control character");
      }
      if (c != '\\') {
        out.append(c);
        continue;
      }
      if (at >= text.length()) {
        throw error("Unterminated string");
      }
      char escaped = text.charAt(at++);
      switch (escaped) {
        case '"', '\\', '/' -> out.append(escaped);
        case 'b' -> out.append('\b');
        case 'f' -> out.append('\f');
        case 'n' -> out.append('\n');
        case 'r' -> out.append('\r');
        case 't' -> out.append('\t');
        case 'u' -> {
          if (at + 4 > text.length()) {
            throw error("Invalid \\uXXXX escape");
          }
          try {
            out.append((char) Integer.parseInt(text.substring(at, at + 4), 16));
          } catch (NumberFormatException e) {
            throw error("Invalid \\uXXXX escape");
          }
          at += 4;
        }
        default -> {
          at--;
          throw error("Invalid \\escape");
        }
      }
    }
  }

  private Double number() {
    int start = at;
    if (at < text.length() && text.charAt(at) == '-') {
      at++;
    }
    if (at < text.length() && text.charAt(at) == '0') {
      at++;
    } else if (!digits()) {
      at = start;
      throw error("Expecting value");
    }
    if (at < text.length() && text.charAt(at) == '.') {
      int point = at++;
      if (!digits()) {
        at = point; // `1.` is the number 1 followed by extra data, as in Python
      }
    }
    if (at < text.length() && (text.charAt(at) == 'e' || text.charAt(at) == 'E')) {
      int exponent = at++;
      if (at < text.length() && (text.charAt(at) == '+' || text.charAt(at) == '-')) {
        at++;
      }
      if (!digits()) {
        at = exponent;
      }
    }
    return Double.parseDouble(text.substring(start, at));
  }

  private boolean digits() {
    int start = at;
    while (at < text.length() && Character.isDigit(text.charAt(at)) && text.charAt(at) < 0x80) {
      at++;
    }
    return at > start;
  }
}
