package dagger.jobs.udfs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import org.junit.jupiter.api.Test;

/** Flink's SPLIT_INDEX and INITCAP, on the cases where Spark's functions of like names differ. */
class FlinkStringFunctionsTest {
  private static final FlinkStringFunctions.SplitIndex SPLIT_INDEX =
      new FlinkStringFunctions.SplitIndex();
  private static final FlinkStringFunctions.InitCap INITCAP = new FlinkStringFunctions.InitCap();

  @Test
  void splitIndexCountsFromZeroAndKeepsEmptyParts() {
    String url = "https://www.nexmark.com/abc/item.htm?query=1";
    assertEquals("https:", SPLIT_INDEX.call(url, "/", 0));
    assertEquals("", SPLIT_INDEX.call(url, "/", 1));
    assertEquals("abc", SPLIT_INDEX.call(url, "/", 3));
    assertEquals("item.htm?query=1", SPLIT_INDEX.call(url, "/", 4));
    assertNull(SPLIT_INDEX.call(url, "/", 5));
    assertNull(SPLIT_INDEX.call(url, "/", -1));
    assertEquals("", SPLIT_INDEX.call("a/b/", "/", 2));
  }

  @Test
  void splitIndexSeparatorIsLiteralAndWhole() {
    assertEquals("b", SPLIT_INDEX.call("a.b.c", ".", 1));
    assertEquals("c", SPLIT_INDEX.call("a::b::c", "::", 2));
    assertEquals("a", SPLIT_INDEX.call("aaa", "aa", 1));
    assertEquals("b", SPLIT_INDEX.call("a b", "", 1));
  }

  @Test
  void splitIndexOfNothingIsNull() {
    assertNull(SPLIT_INDEX.call("", "/", 0));
    assertNull(SPLIT_INDEX.call(null, "/", 0));
    assertNull(SPLIT_INDEX.call("a/b", null, 0));
    assertNull(SPLIT_INDEX.call("a/b", "/", null));
  }

  @Test
  void initcapWordsAreLettersAndDigits() {
    assertEquals("Hello-World X_Y", INITCAP.call("hello-WORLD x_y"));
    assertEquals("3rd ééA", INITCAP.call("3RD ééA"));
    assertNull(INITCAP.call(null));
  }
}
