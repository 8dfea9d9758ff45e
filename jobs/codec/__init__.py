"""Record formats: a stream's records decoded into columns and a sink's rows encoded into records
(protobuf in the JVM or by ptars, Avro, JSON); `formats` chooses the codec from a stream's keys."""
