// CuratorContender is the Curator side of zkdriver's Curator interop tests
// (curator_test.go): the test compiles it with javac against Debian's
// Curator jars and runs it as processes next to locker's.
//
// Usage: CuratorContender connect path mode threads store side sessionMs
//
// mode "mutex" takes an InterProcessMutex, "rw" an InterProcessReadWriteLock
// (writes and reads in turn), "hold" takes an InterProcessMutex once,
// prints "HELD" and keeps it until its standard input ends, "acquire" prints "READY", takes
// an InterProcessMutex, prints "ACQUIRED <Unix ms>", releases it and exits;
// "rhold", "whold", "racquire" and "wacquire" do the same with the read or write
// lock of an InterProcessReadWriteLock; "lead" runs a LeaderSelector that
// prints "LEADING" when it takes leadership and gives it up when its
// standard input ends.
// Otherwise the process prints
// "READY" once connected and waits for the file GO in the store directory,
// which holds the wall clock time (Unix ms) to stop at; each thread then
// contends until that time, with a critical section over the store
// directory that curator_test.go's locker side runs too, and the process
// prints "RESULT <side> <writes> <reads> <overlaps> <shared>".
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.retry.RetryNTimes;

public class CuratorContender {
    static final AtomicLong writes = new AtomicLong(), reads = new AtomicLong(),
            overlaps = new AtomicLong(), shared = new AtomicLong();
    static Path store;
    static String side;

    public static void main(String[] a) throws Exception {
        String connect = a[0], path = a[1], mode = a[2];
        int threads = Integer.parseInt(a[3]);
        store = Paths.get(a[4]);
        side = a[5];
        int sessionMs = Integer.parseInt(a[6]);
        CuratorFramework c = CuratorFrameworkFactory.builder().connectString(connect)
                .sessionTimeoutMs(sessionMs).connectionTimeoutMs(10000)
                .retryPolicy(new RetryNTimes(1000, 50)).build();
        c.start();
        c.blockUntilConnected();
        if (mode.equals("lead")) {
            LeaderSelector ls = new LeaderSelector(c, path, new LeaderSelectorListenerAdapter() {
                @Override
                public void takeLeadership(CuratorFramework cf) throws Exception {
                    System.out.println("LEADING");
                    System.out.flush();
                    while (System.in.read() >= 0) {
                    }
                }
            });
            ls.start(); // takeLeadership returning gives leadership up (no requeue)
            Thread.sleep(Long.MAX_VALUE);
        }
        InterProcessReadWriteLock once = new InterProcessReadWriteLock(c, path);
        if (mode.equals("hold") || mode.equals("rhold") || mode.equals("whold")) {
            InterProcessLock l = mode.equals("hold") ? new InterProcessMutex(c, path)
                    : mode.equals("rhold") ? once.readLock() : once.writeLock();
            l.acquire();
            System.out.println("HELD");
            System.out.flush();
            while (System.in.read() >= 0) {
            }
            l.release();
            c.close();
            return;
        }
        if (mode.endsWith("acquire")) {
            InterProcessLock m = mode.equals("racquire") ? once.readLock()
                    : mode.equals("wacquire") ? once.writeLock() : new InterProcessMutex(c, path);
            System.out.println("READY");
            System.out.flush();
            m.acquire();
            System.out.println("ACQUIRED " + System.currentTimeMillis());
            System.out.flush();
            m.release();
            c.close();
            return;
        }
        System.out.println("READY");
        System.out.flush();
        Path go = store.resolve("GO");
        while (!Files.exists(go)) Thread.sleep(1);
        long end = Long.parseLong(new String(Files.readAllBytes(go), StandardCharsets.UTF_8).trim());
        Thread[] ts = new Thread[threads];
        for (int i = 0; i < threads; i++) {
            ts[i] = new Thread(() -> {
                try {
                    InterProcessMutex m = new InterProcessMutex(c, path);
                    InterProcessReadWriteLock rw = new InterProcessReadWriteLock(c, path);
                    for (long n = 0; System.currentTimeMillis() < end; n++) {
                        boolean write = mode.equals("mutex") || n % 2 == 0;
                        InterProcessLock l = mode.equals("mutex") ? m : write ? rw.writeLock() : rw.readLock();
                        l.acquire();
                        try {
                            if (write) exclusive(); else shared();
                        } finally {
                            l.release();
                        }
                    }
                } catch (Exception e) {
                    e.printStackTrace();
                    System.exit(2);
                }
            });
            ts[i].start();
        }
        for (Thread t : ts) t.join();
        c.close();
        System.out.println("RESULT " + side + " " + writes + " " + reads + " " + overlaps + " " + shared);
    }

    // exclusive is a writer's critical section: it marks the store taken
    // (W, created exclusively), checks that no reader is in, and increments
    // the counter by a read, a pause and a write.
    static void exclusive() throws Exception {
        Path w = store.resolve("W");
        boolean mine = true;
        try {
            Files.createFile(w);
        } catch (FileAlreadyExistsException e) {
            overlaps.incrementAndGet();
            mine = false;
        }
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(store, "R.*")) {
            if (ds.iterator().hasNext()) overlaps.incrementAndGet();
        }
        long v = counter();
        Thread.sleep(1);
        Path tmp = store.resolve("tmp." + side + "." + ProcessHandle.current().pid() + "." + Thread.currentThread().getId());
        Files.write(tmp, Long.toString(v + 1).getBytes(StandardCharsets.UTF_8));
        Files.move(tmp, store.resolve("counter"), StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        if (mine) Files.delete(w);
        writes.incrementAndGet();
    }

    // shared is a reader's critical section: it marks itself in (R.<side>…),
    // checks that no writer is in and that the counter does not change, and
    // notes whether a reader of another library is in at the same time.
    static void shared() throws Exception {
        Path r = store.resolve("R." + side + "." + ProcessHandle.current().pid() + "." + Thread.currentThread().getId());
        Files.createFile(r);
        if (Files.exists(store.resolve("W"))) overlaps.incrementAndGet();
        long v = counter();
        Thread.sleep(1);
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(store, "R.*")) {
            for (Path p : ds) {
                if (!p.getFileName().toString().startsWith("R." + side + ".")) {
                    shared.incrementAndGet();
                    break;
                }
            }
        }
        if (counter() != v) overlaps.incrementAndGet();
        Files.delete(r);
        reads.incrementAndGet();
    }

    static long counter() throws Exception {
        try {
            return Long.parseLong(new String(Files.readAllBytes(store.resolve("counter")), StandardCharsets.UTF_8).trim());
        } catch (NoSuchFileException e) {
            return 0;
        }
    }
}
