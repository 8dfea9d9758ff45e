package com.github.nexmark.flink.udf;

import dagger.jobs.udfs.scripted.CountCharacters;
import org.apache.flink.table.functions.ScalarFunction;

/**
 * Nexmark q14's {@code count_char}, under the class name its script declares ({@code CREATE FUNCTION
 * count_char AS 'com.github.nexmark.flink.udf.CountChar'}), written for the project's tests: a Flink
 * ScalarFunction, which Apache Flink loads as one and the dagger loads as a class of public {@code eval}
 * methods once Flink's flink-table-common and flink-core jars are among its jars. Nexmark ships its own in
 * a jar the project does not have; tests pack this one, with {@link CountCharacters}, into a jar of their
 * own.
 */
public class CountChar extends ScalarFunction {
  private static final CountCharacters COUNTER = new CountCharacters();

  /** Occurrences of {@code character}'s first character in {@code text}; 0 for a NULL text. */
  public long eval(String text, String character) {
    return COUNTER.eval(text, character);
  }
}
