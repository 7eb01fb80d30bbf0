package io.krm.tiered;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Stream;

import org.apache.kafka.server.log.remote.storage.LogSegmentData;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteResourceNotFoundException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageManager;

/**
 * A remote tier in a folder of this machine, for `krm local-cluster up --tiered-storage` (KIP-405).
 *
 * Kafka's own LocalTieredStorage lives in a test jar that is not published for every release and
 * does not load across releases (4.3's needs a class 4.4 moved), so krm brings this small one,
 * written against the public RemoteStorageManager interface only (the same in Kafka 3.9 and 4.x).
 *
 * Layout: {dir}/{topic}-{partition}-{topicId}/{segmentId}/ holding the segment and each index under
 * the names of RemoteStorageManager.IndexType. Files are written to a temporary folder and renamed
 * into place, so a reader never sees half a segment. Broker setting: rsm.config.dir (with
 * remote.log.storage.manager.impl.prefix=rsm.config.).
 */
public class FolderRemoteStorageManager implements RemoteStorageManager {
    private static final String SEGMENT = "segment";
    private Path root;

    @Override
    public void configure(Map<String, ?> configs) {
        Object dir = configs.get("dir");
        if (dir == null) {
            throw new IllegalArgumentException("FolderRemoteStorageManager needs its folder: set rsm.config.dir");
        }
        root = Paths.get(dir.toString());
        try {
            Files.createDirectories(root);
        } catch (IOException e) {
            throw new IllegalArgumentException("cannot create the remote storage folder " + root, e);
        }
    }

    private Path segmentDir(RemoteLogSegmentMetadata m) {
        var tip = m.remoteLogSegmentId().topicIdPartition();
        String partition = tip.topic() + "-" + tip.partition() + "-" + tip.topicId();
        return root.resolve(partition).resolve(m.remoteLogSegmentId().id().toString());
    }

    @Override
    public Optional<RemoteLogSegmentMetadata.CustomMetadata> copyLogSegmentData(
            RemoteLogSegmentMetadata metadata, LogSegmentData data) throws RemoteStorageException {
        Path target = segmentDir(metadata);
        Path tmp = target.resolveSibling(target.getFileName() + ".tmp");
        try {
            Files.createDirectories(tmp);
            Files.copy(data.logSegment(), tmp.resolve(SEGMENT), StandardCopyOption.REPLACE_EXISTING);
            Files.copy(data.offsetIndex(), tmp.resolve(IndexType.OFFSET.name()), StandardCopyOption.REPLACE_EXISTING);
            Files.copy(data.timeIndex(), tmp.resolve(IndexType.TIMESTAMP.name()), StandardCopyOption.REPLACE_EXISTING);
            if (data.transactionIndex().isPresent()) {
                Files.copy(data.transactionIndex().get(), tmp.resolve(IndexType.TRANSACTION.name()),
                        StandardCopyOption.REPLACE_EXISTING);
            }
            Files.copy(data.producerSnapshotIndex(), tmp.resolve(IndexType.PRODUCER_SNAPSHOT.name()),
                    StandardCopyOption.REPLACE_EXISTING);
            ByteBuffer epochs = data.leaderEpochIndex().duplicate();
            byte[] bytes = new byte[epochs.remaining()];
            epochs.get(bytes);
            Files.write(tmp.resolve(IndexType.LEADER_EPOCH.name()), bytes);
            deleteTree(target);
            Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
            throw new RemoteStorageException("copying " + metadata.remoteLogSegmentId() + " to " + target, e);
        }
        return Optional.empty();
    }

    @Override
    public InputStream fetchLogSegment(RemoteLogSegmentMetadata metadata, int startPosition)
            throws RemoteStorageException {
        return fetchLogSegment(metadata, startPosition, Integer.MAX_VALUE);
    }

    @Override
    public InputStream fetchLogSegment(RemoteLogSegmentMetadata metadata, int startPosition, int endPosition)
            throws RemoteStorageException {
        Path file = existing(segmentDir(metadata).resolve(SEGMENT), metadata);
        try (RandomAccessFile f = new RandomAccessFile(file.toFile(), "r")) {
            long end = Math.min(f.length(), (long) endPosition + 1);  // endPosition is inclusive
            int length = (int) Math.max(0, end - startPosition);
            byte[] bytes = new byte[length];
            f.seek(startPosition);
            f.readFully(bytes);
            return new ByteArrayInputStream(bytes);
        } catch (IOException e) {
            throw new RemoteStorageException("reading " + file, e);
        }
    }

    @Override
    public InputStream fetchIndex(RemoteLogSegmentMetadata metadata, IndexType indexType)
            throws RemoteStorageException {
        Path file = existing(segmentDir(metadata).resolve(indexType.name()), metadata);
        try {
            return Files.newInputStream(file);
        } catch (IOException e) {
            throw new RemoteStorageException("reading " + file, e);
        }
    }

    @Override
    public void deleteLogSegmentData(RemoteLogSegmentMetadata metadata) throws RemoteStorageException {
        try {
            deleteTree(segmentDir(metadata));
        } catch (IOException e) {
            throw new RemoteStorageException("deleting " + metadata.remoteLogSegmentId(), e);
        }
    }

    @Override
    public void close() {
    }

    private static Path existing(Path file, RemoteLogSegmentMetadata metadata) throws RemoteResourceNotFoundException {
        if (!Files.exists(file)) {
            throw new RemoteResourceNotFoundException(file.getFileName() + " of " + metadata.remoteLogSegmentId()
                    + " is not in the remote tier");
        }
        return file;
    }

    private static void deleteTree(Path dir) throws IOException {
        if (!Files.exists(dir)) {
            return;
        }
        try (Stream<Path> paths = Files.walk(dir)) {
            for (Path p : (Iterable<Path>) paths.sorted((a, b) -> b.compareTo(a))::iterator) {
                Files.deleteIfExists(p);
            }
        }
    }
}
