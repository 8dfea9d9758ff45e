package dagger.jobs.udfs.scripted;

/**
 * A user's function as Nexmark's q14 declares one ({@code CREATE FUNCTION count_char AS '...'}): how often
 * a character occurs in a text. Not in the project's jar: tests pack it into a jar of their own.
 */
public class CountCharacters {
  /** Occurrences of {@code character}'s first character in {@code text}; 0 for a NULL text. */
  public long eval(String text, String character) {
    if (text == null || character == null || character.isEmpty()) {
      return 0;
    }
    return text.chars().filter(c -> c == character.charAt(0)).count();
  }

  /** Occurrences of the character of code point {@code code}: an overload chosen by the argument type. */
  public long eval(String text, long code) {
    return text == null ? 0 : text.chars().filter(c -> c == code).count();
  }
}
