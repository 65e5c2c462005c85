package topicberg.testbed;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.ByteArrayOutputStream;
import java.math.BigDecimal;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.kafka.connect.data.Date;
import org.apache.kafka.connect.data.Decimal;
import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.data.Time;
import org.apache.kafka.connect.data.Timestamp;
import org.apache.kafka.connect.errors.DataException;
import org.apache.kafka.connect.storage.Converter;

/**
 * A Kafka Connect converter writing Avro in the schema registry's wire format (byte 0, the
 * schema's id as 4 big-endian bytes, the Avro binary body), registering each schema under
 * TopicNameStrategy's subject ({@code <topic>-key} / {@code <topic>-value}) of a
 * Confluent-compatible registry ({@code schema.registry.url}).
 *
 * <p>The test bed's stand-in for Confluent's AvroConverter, which Maven Central does not
 * serve. Connect schemas become Avro schemas by the conventions that converter documents and
 * writes (so the registry holds what a user's registry holds): a struct is a record named by
 * the Connect schema's name (its first use defines it, later uses name it), an optional
 * schema a union of null and the type with default null, int8/int16 an int with {@code
 * connect.type}, a named schema carries {@code connect.name}, {@code connect.version} and
 * {@code connect.parameters}, Connect's Decimal is bytes with logical type decimal (precision
 * from {@code connect.decimal.precision}, 64 without), Date/Time/Timestamp the Avro logical
 * types, a map with string keys an Avro map. Written from the Avro 1.12 specification's
 * binary encoding; no Avro library. Source connectors only: toConnectData is not supported.
 */
public final class RegistryAvroConverter implements Converter {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final JsonNodeFactory NODES = JsonNodeFactory.instance;
  private static final int DEFAULT_DECIMAL_PRECISION = 64;

  private final HttpClient http =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
  private final Map<Schema, Integer> ids = new ConcurrentHashMap<>();
  private String registry;
  private boolean isKey;

  @Override
  public void configure(Map<String, ?> configs, boolean isKey) {
    Object url = configs.get("schema.registry.url");
    if (url == null) {
      throw new DataException("RegistryAvroConverter needs schema.registry.url");
    }
    this.registry = url.toString().replaceAll("/+$", "");
    this.isKey = isKey;
  }

  @Override
  public byte[] fromConnectData(String topic, Schema schema, Object value) {
    if (value == null) {
      return null;
    }
    if (schema == null) {
      throw new DataException("RegistryAvroConverter needs a schema (topic " + topic + ")");
    }
    int id = ids.computeIfAbsent(schema, s -> register(topic, avroSchema(s)));
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    out.write(0);
    out.write(id >>> 24);
    out.write(id >>> 16);
    out.write(id >>> 8);
    out.write(id);
    write(out, schema, value);
    return out.toByteArray();
  }

  @Override
  public SchemaAndValue toConnectData(String topic, byte[] value) {
    throw new UnsupportedOperationException("RegistryAvroConverter writes only");
  }

  private int register(String topic, JsonNode schema) {
    String subject = topic + (isKey ? "-key" : "-value");
    try {
      ObjectNode body = NODES.objectNode();
      body.put("schema", JSON.writeValueAsString(schema));
      HttpRequest request =
          HttpRequest.newBuilder(URI.create(registry + "/subjects/" + subject + "/versions"))
              .header("Content-Type", "application/vnd.schemaregistry.v1+json")
              .POST(HttpRequest.BodyPublishers.ofString(JSON.writeValueAsString(body)))
              .build();
      HttpResponse<String> response = http.send(request, HttpResponse.BodyHandlers.ofString());
      if (response.statusCode() != 200) {
        throw new DataException(
            "registering " + subject + ": " + response.statusCode() + " " + response.body());
      }
      return JSON.readTree(response.body()).get("id").asInt();
    } catch (java.io.IOException | InterruptedException e) {
      throw new DataException("registering " + subject + ": " + e, e);
    }
  }

  // ---- Connect schema -> Avro schema ----

  static JsonNode avroSchema(Schema schema) {
    return new SchemaWriter().optional(schema);
  }

  private static final class SchemaWriter {
    private final Set<String> defined = new HashSet<>();

    /** The schema, as a union with null when it is optional. */
    JsonNode optional(Schema s) {
      JsonNode type = type(s);
      if (!s.isOptional()) {
        return type;
      }
      ArrayNode union = NODES.arrayNode();
      union.add("null");
      union.add(type);
      return union;
    }

    JsonNode type(Schema s) {
      ObjectNode node = NODES.objectNode();
      String name = s.name();
      if (Decimal.LOGICAL_NAME.equals(name)) {
        node.put("type", "bytes");
        int scale = Integer.parseInt(s.parameters().get(Decimal.SCALE_FIELD));
        String p = s.parameters().get("connect.decimal.precision");
        node.put("scale", scale);
        node.put("precision", p == null ? DEFAULT_DECIMAL_PRECISION : Integer.parseInt(p));
        node.put("logicalType", "decimal");
      } else if (Date.LOGICAL_NAME.equals(name)) {
        node.put("type", "int");
        node.put("logicalType", "date");
      } else if (Time.LOGICAL_NAME.equals(name)) {
        node.put("type", "int");
        node.put("logicalType", "time-millis");
      } else if (Timestamp.LOGICAL_NAME.equals(name)) {
        node.put("type", "long");
        node.put("logicalType", "timestamp-millis");
      } else {
        switch (s.type()) {
          case INT8:
          case INT16:
            node.put("type", "int");
            node.put("connect.type", s.type().getName());
            break;
          case INT32:
            node.put("type", "int");
            break;
          case INT64:
            node.put("type", "long");
            break;
          case FLOAT32:
            node.put("type", "float");
            break;
          case FLOAT64:
            node.put("type", "double");
            break;
          case BOOLEAN:
            node.put("type", "boolean");
            break;
          case STRING:
            node.put("type", "string");
            break;
          case BYTES:
            node.put("type", "bytes");
            break;
          case ARRAY:
            node.put("type", "array");
            node.set("items", optional(s.valueSchema()));
            break;
          case MAP:
            if (s.keySchema().type() != Schema.Type.STRING) {
              throw new DataException("maps with non-string keys are not written");
            }
            node.put("type", "map");
            node.set("values", optional(s.valueSchema()));
            break;
          case STRUCT:
            return record(s);
          default:
            throw new DataException("Connect type " + s.type() + " is not written");
        }
      }
      connectProperties(node, s);
      return node.size() == 1 ? node.get("type") : node;
    }

    private JsonNode record(Schema s) {
      String full = s.name() == null ? "io.confluent.connect.avro.ConnectDefault" : s.name();
      if (!defined.add(full)) {
        return NODES.textNode(full);
      }
      ObjectNode node = NODES.objectNode();
      node.put("type", "record");
      int dot = full.lastIndexOf('.');
      node.put("name", full.substring(dot + 1));
      if (dot > 0) {
        node.put("namespace", full.substring(0, dot));
      }
      ArrayNode fields = node.putArray("fields");
      for (Field f : s.fields()) {
        ObjectNode field = fields.addObject();
        field.put("name", f.name());
        field.set("type", optional(f.schema()));
        if (f.schema().isOptional()) {
          field.putNull("default");
        }
      }
      connectProperties(node, s);
      return node;
    }

    private static void connectProperties(ObjectNode node, Schema s) {
      if (s.version() != null) {
        node.put("connect.version", s.version());
      }
      if (s.parameters() != null && !s.parameters().isEmpty()) {
        ObjectNode parameters = node.putObject("connect.parameters");
        s.parameters().forEach(parameters::put);
      }
      if (s.name() != null) {
        node.put("connect.name", s.name());
      }
    }
  }

  // ---- Connect value -> Avro binary ----

  private static void write(ByteArrayOutputStream out, Schema s, Object v) {
    if (s.isOptional()) {
      if (v == null) {
        writeLong(out, 0);
        return;
      }
      writeLong(out, 1);
    } else if (v == null) {
      throw new DataException("null for a required " + s.type());
    }
    String name = s.name();
    if (Decimal.LOGICAL_NAME.equals(name)) {
      writeBytes(out, ((BigDecimal) v).unscaledValue().toByteArray());
      return;
    }
    if (Date.LOGICAL_NAME.equals(name)) {
      writeLong(out, Math.floorDiv(((java.util.Date) v).getTime(), 86_400_000L));
      return;
    }
    if (Time.LOGICAL_NAME.equals(name) || Timestamp.LOGICAL_NAME.equals(name)) {
      writeLong(out, ((java.util.Date) v).getTime());
      return;
    }
    switch (s.type()) {
      case INT8:
      case INT16:
      case INT32:
      case INT64:
        writeLong(out, ((Number) v).longValue());
        break;
      case FLOAT32:
        writeFixed(out, Integer.reverseBytes(Float.floatToIntBits((Float) v)), 4);
        break;
      case FLOAT64:
        writeFixed(out, Long.reverseBytes(Double.doubleToLongBits((Double) v)), 8);
        break;
      case BOOLEAN:
        out.write(((Boolean) v) ? 1 : 0);
        break;
      case STRING:
        writeBytes(out, ((String) v).getBytes(StandardCharsets.UTF_8));
        break;
      case BYTES:
        writeBytes(out, v instanceof ByteBuffer ? bytes((ByteBuffer) v) : (byte[]) v);
        break;
      case ARRAY:
        List<?> items = (List<?>) v;
        if (!items.isEmpty()) {
          writeLong(out, items.size());
          for (Object item : items) {
            write(out, s.valueSchema(), item);
          }
        }
        writeLong(out, 0);
        break;
      case MAP:
        Map<?, ?> map = (Map<?, ?>) v;
        if (!map.isEmpty()) {
          writeLong(out, map.size());
          for (Map.Entry<?, ?> e : map.entrySet()) {
            writeBytes(out, e.getKey().toString().getBytes(StandardCharsets.UTF_8));
            write(out, s.valueSchema(), e.getValue());
          }
        }
        writeLong(out, 0);
        break;
      case STRUCT:
        Struct struct = (Struct) v;
        for (Field f : s.fields()) {
          write(out, f.schema(), struct.get(f));
        }
        break;
      default:
        throw new DataException("Connect type " + s.type() + " is not written");
    }
  }

  private static byte[] bytes(ByteBuffer b) {
    ByteBuffer copy = b.duplicate();
    byte[] out = new byte[copy.remaining()];
    copy.get(out);
    return out;
  }

  /** A long as Avro writes it: zig-zag, then 7 bits a byte, low first. */
  private static void writeLong(ByteArrayOutputStream out, long n) {
    long z = (n << 1) ^ (n >> 63);
    while ((z & ~0x7FL) != 0) {
      out.write((int) ((z & 0x7F) | 0x80));
      z >>>= 7;
    }
    out.write((int) z);
  }

  private static void writeBytes(ByteArrayOutputStream out, byte[] b) {
    writeLong(out, b.length);
    out.write(b, 0, b.length);
  }

  /** The low `size` bytes of `bits`, most significant first (already byte-reversed). */
  private static void writeFixed(ByteArrayOutputStream out, long bits, int size) {
    for (int i = size - 1; i >= 0; i--) {
      out.write((int) (bits >>> (8 * i)));
    }
  }
}
