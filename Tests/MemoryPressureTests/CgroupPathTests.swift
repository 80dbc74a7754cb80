import MemoryPressure
import Testing

@Suite struct CgroupPathTests {
    static let unifiedMount = """
        24 30 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
        28 24 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
        29 24 0:27 / /sys/fs/pstore rw,nosuid,nodev,noexec,relatime shared:10 - pstore pstore rw
        """

    // Measured on the build machine: v1 controllers, cgroup2 at /sys/fs/cgroup/unified.
    static let hybridMount = """
        31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
        35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
        40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
        41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
        """

    static let pureV1Mount = """
        31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
        35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
        """

    @Test func unifiedHierarchy() {
        let cgroup = "0::/system.slice/modelc.service\n"
        #expect(MemoryPressureSources.cgroupPressurePath(procSelfCgroup: cgroup, mountInfo: Self.unifiedMount)
            == "/sys/fs/cgroup/system.slice/modelc.service/memory.pressure")
    }

    @Test func nestedCgroup() {
        let cgroup = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/build.scope\n"
        #expect(MemoryPressureSources.cgroupPressurePath(procSelfCgroup: cgroup, mountInfo: Self.unifiedMount)
            == "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/build.scope/memory.pressure")
    }

    @Test func rootCgroup() {
        #expect(MemoryPressureSources.cgroupPressurePath(procSelfCgroup: "0::/\n", mountInfo: Self.unifiedMount)
            == "/sys/fs/cgroup/memory.pressure")
    }

    @Test func hybridWithV1Controllers() {
        let cgroup = """
            9:name=systemd:/
            4:memory:/process_api/70d3910b47e95be3a80781e3c9139b90
            1:cpu:/
            0::/
            """
        #expect(MemoryPressureSources.cgroupPressurePath(procSelfCgroup: cgroup, mountInfo: Self.hybridMount)
            == "/sys/fs/cgroup/unified/memory.pressure")
    }

    @Test func pureV1HasNoPressureFile() {
        let cgroup = "4:memory:/user.slice\n1:name=systemd:/user.slice/session-1.scope\n"
        #expect(MemoryPressureSources.cgroupPressurePath(procSelfCgroup: cgroup, mountInfo: Self.pureV1Mount) == nil)
        // A kernel with cgroup2 built in lists "0::/" even when nothing mounts it.
        #expect(MemoryPressureSources.cgroupPressurePath(procSelfCgroup: cgroup + "0::/\n", mountInfo: Self.pureV1Mount) == nil)
    }

    @Test func otherMountPoint() {
        let mounts = "50 20 0:40 / /run/cgroup\\040two rw,relatime shared:3 master:1 - cgroup2 none rw\n"
        #expect(MemoryPressureSources.cgroupPressurePath(procSelfCgroup: "0::/jobs/7\n", mountInfo: mounts)
            == "/run/cgroup two/jobs/7/memory.pressure")
    }

    @Test func mountOfASubtree() {
        // A container without its own cgroup namespace: only its subtree is mounted.
        let mounts = "60 50 0:30 /docker/abc /sys/fs/cgroup ro,nosuid - cgroup2 cgroup rw\n"
        #expect(MemoryPressureSources.cgroupPressurePath(procSelfCgroup: "0::/docker/abc\n", mountInfo: mounts)
            == "/sys/fs/cgroup/memory.pressure")
        #expect(MemoryPressureSources.cgroupPressurePath(procSelfCgroup: "0::/docker/abc/worker\n", mountInfo: mounts)
            == "/sys/fs/cgroup/worker/memory.pressure")
        #expect(MemoryPressureSources.cgroupPressurePath(procSelfCgroup: "0::/docker/abcdef\n", mountInfo: mounts) == nil)
    }

    @Test func unreadableMountInfoAssumesTheUsualMountPoint() {
        #expect(MemoryPressureSources.cgroupPressurePath(procSelfCgroup: "0::/a/b\n", mountInfo: "")
            == "/sys/fs/cgroup/a/b/memory.pressure")
    }

    @Test func removedOrMalformedCgroupHasNone() {
        #expect(MemoryPressureSources.cgroupPressurePath(procSelfCgroup: "0::/gone (deleted)\n", mountInfo: Self.unifiedMount) == nil)
        #expect(MemoryPressureSources.cgroupPressurePath(procSelfCgroup: "0::\n", mountInfo: Self.unifiedMount) == nil)
        #expect(MemoryPressureSources.cgroupPressurePath(procSelfCgroup: "", mountInfo: Self.unifiedMount) == nil)
    }
}
