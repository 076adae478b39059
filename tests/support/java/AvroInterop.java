// Reads and writes Avro container files and single-object messages with Apache Avro for
// Java (the reference implementation), so the tests can check the event log against it.
// One run does a whole plan, so a test module starts one JVM: `AvroInterop PLAN.tsv`.
// Each line of the plan is one case, tab-separated: the file its outcome goes to, then a
// command with its arguments. The outcome file says `ok`, or `failed` and the stack trace;
// a failed case does not stop the others. Records cross to and from Python in Avro's JSON
// encoding, one record per line.
//   read  FILE READER.avsc OUT.jsonl        each record of FILE resolved to READER's schema
//   write SCHEMA.avsc IN.jsonl OUT.avro CODEC   a container file of IN's records
//   decode-messages IN.hex READER.avsc OUT.jsonl WRITER.avsc...
//                   single-object messages (hex, one a line) resolved to READER's schema,
//                   the writer schema found by fingerprint among the WRITER schemas
//   encode-messages SCHEMA.avsc IN.jsonl OUT.hex    IN's records as single-object messages

import java.io.BufferedOutputStream;
import java.io.EOFException;
import java.io.File;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import org.apache.avro.Schema;
import org.apache.avro.file.CodecFactory;
import org.apache.avro.file.DataFileReader;
import org.apache.avro.file.DataFileWriter;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.Decoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.avro.io.EncoderFactory;
import org.apache.avro.io.JsonEncoder;
import org.apache.avro.message.BinaryMessageDecoder;
import org.apache.avro.message.BinaryMessageEncoder;

public final class AvroInterop {
    private AvroInterop() {}

    public static void main(String[] args) throws IOException {
        if (args.length != 1) {
            System.err.println("usage: AvroInterop PLAN.tsv (see the header)");
            System.exit(2);
        }
        for (String line : Files.readAllLines(Path.of(args[0]), StandardCharsets.UTF_8)) {
            if (line.isBlank()) {
                continue;
            }
            String[] fields = line.split("\t", -1);
            String outcome;
            try {
                run(Arrays.copyOfRange(fields, 1, fields.length));
                outcome = "ok\n";
            } catch (Exception failure) {
                // the case's own failure, reported in its outcome; the next case still runs
                StringWriter trace = new StringWriter();
                failure.printStackTrace(new PrintWriter(trace));
                outcome = "failed\n" + trace;
            }
            Files.writeString(Path.of(fields[0]), outcome, StandardCharsets.UTF_8);
        }
    }

    private static void run(String[] command) throws IOException {
        if (command.length == 4 && command[0].equals("read")) {
            read(new File(command[1]), parse(command[2]), new File(command[3]));
        } else if (command.length == 5 && command[0].equals("write")) {
            write(parse(command[1]), new File(command[2]), new File(command[3]), command[4]);
        } else if (command.length >= 5 && command[0].equals("decode-messages")) {
            decodeMessages(new File(command[1]), parse(command[2]), new File(command[3]), command);
        } else if (command.length == 4 && command[0].equals("encode-messages")) {
            encodeMessages(parse(command[1]), new File(command[2]), new File(command[3]));
        } else {
            throw new IllegalArgumentException(
                    "not a command (read | write | decode-messages | encode-messages): "
                            + String.join(" ", command));
        }
    }

    private static Schema parse(String path) throws IOException {
        return new Schema.Parser().parse(new File(path));
    }

    private static void read(File file, Schema reader, File out) throws IOException {
        GenericDatumReader<GenericRecord> datumReader = new GenericDatumReader<>(null, reader);
        GenericDatumWriter<GenericRecord> datumWriter = new GenericDatumWriter<>(reader);
        try (DataFileReader<GenericRecord> records = new DataFileReader<>(file, datumReader);
                OutputStream sink = new BufferedOutputStream(new FileOutputStream(out))) {
            for (GenericRecord record : records) {
                JsonEncoder encoder = EncoderFactory.get().jsonEncoder(reader, sink);
                datumWriter.write(record, encoder);
                encoder.flush();
                sink.write('\n');
            }
        }
    }

    private static List<GenericRecord> jsonRecords(Schema schema, File in) throws IOException {
        GenericDatumReader<GenericRecord> datumReader = new GenericDatumReader<>(schema);
        List<GenericRecord> records = new ArrayList<>();
        try (InputStream source = new FileInputStream(in)) {
            Decoder decoder = DecoderFactory.get().jsonDecoder(schema, source);
            while (true) {
                try {
                    records.add(datumReader.read(null, decoder));
                } catch (EOFException end) {
                    return records;
                }
            }
        }
    }

    private static void write(Schema schema, File in, File out, String codec) throws IOException {
        try (DataFileWriter<GenericRecord> writer =
                new DataFileWriter<>(new GenericDatumWriter<GenericRecord>(schema))) {
            writer.setCodec(CodecFactory.fromString(codec));
            writer.create(schema, out);
            for (GenericRecord record : jsonRecords(schema, in)) {
                writer.append(record);
            }
        }
    }

    private static void decodeMessages(File in, Schema reader, File out, String[] command)
            throws IOException {
        BinaryMessageDecoder<GenericRecord> decoder =
                new BinaryMessageDecoder<>(GenericData.get(), reader);
        for (int i = 4; i < command.length; i++) {
            decoder.addSchema(parse(command[i]));
        }
        GenericDatumWriter<GenericRecord> datumWriter = new GenericDatumWriter<>(reader);
        try (OutputStream sink = new BufferedOutputStream(new FileOutputStream(out))) {
            for (String line : Files.readAllLines(in.toPath(), StandardCharsets.US_ASCII)) {
                if (line.isBlank()) {
                    continue;
                }
                GenericRecord record = decoder.decode(HexFormat.of().parseHex(line.strip()));
                JsonEncoder encoder = EncoderFactory.get().jsonEncoder(reader, sink);
                datumWriter.write(record, encoder);
                encoder.flush();
                sink.write('\n');
            }
        }
    }

    private static void encodeMessages(Schema schema, File in, File out) throws IOException {
        BinaryMessageEncoder<GenericRecord> encoder =
                new BinaryMessageEncoder<>(GenericData.get(), schema);
        StringBuilder hex = new StringBuilder();
        for (GenericRecord record : jsonRecords(schema, in)) {
            ByteBuffer message = encoder.encode(record);
            byte[] bytes = new byte[message.remaining()];
            message.get(bytes);
            hex.append(HexFormat.of().formatHex(bytes)).append('\n');
        }
        Files.writeString(out.toPath(), hex.toString(), StandardCharsets.US_ASCII);
    }
}
