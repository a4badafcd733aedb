/* OOM-kill witnesses (src/agent/oom.c): the cgroup files' grammar, the
 * memory cgroup's directory from /proc/<pid>/cgroup (v1 and v2), the kernel
 * log's record, a mark over a fake /proc and cgroup tree, and, where this
 * host lets a test make a memory cgroup, a real OOM kill seen both ways. */
#include "agent/oom.h"
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

TEST(agent_oom_parse_kills_reads_both_cgroup_versions)
{
    uint64_t k = 99;
    const char *v2 = "low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n";
    ASSERT_EQ(agent__oom_parse_kills(v2, strlen(v2), &k), 0);
    ASSERT_EQ(k, (uint64_t)2);
    const char *v1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 7";
    ASSERT_EQ(agent__oom_parse_kills(v1, strlen(v1), &k), 0);
    ASSERT_EQ(k, (uint64_t)7);
    const char *bad[] = { "oom 3\n", "oom_kill x\n", "oom_kill 12abc\n",
                          "oom_kill 99999999999999999999999\n", "" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (agent__oom_parse_kills(bad[i], strlen(bad[i]), &k) != -1)
            FAIL("accepted \"%s\"", bad[i]);
}

TEST(agent_oom_cgroup_dir_prefers_the_v1_memory_controller)
{
    char dir[256];
    bool v1 = false;
    const char *hybrid = "9:name=systemd:/\n4:cpu,memory:/slurm/job_7/step_0\n0::/\n";
    ASSERT_EQ(agent__oom_cgroup_dir(hybrid, strlen(hybrid), "/sys/fs/cgroup", dir, sizeof dir, &v1),
              0);
    ASSERT(v1);
    ASSERT_STR_EQ(dir, "/sys/fs/cgroup/memory/slurm/job_7/step_0");
    const char *unified = "0::/user.slice/job.scope\n";
    ASSERT_EQ(agent__oom_cgroup_dir(unified, strlen(unified), "/cg", dir, sizeof dir, &v1), 0);
    ASSERT(!v1);
    ASSERT_STR_EQ(dir, "/cg/user.slice/job.scope");
    const char *root = "0::/\n";
    ASSERT_EQ(agent__oom_cgroup_dir(root, strlen(root), "/cg", dir, sizeof dir, &v1), 0);
    ASSERT_STR_EQ(dir, "/cg");
    const char *escape = "0::/a/../../etc\n";
    ASSERT_EQ(agent__oom_cgroup_dir(escape, strlen(escape), "/cg", dir, sizeof dir, &v1), -1);
    ASSERT_EQ(agent__oom_cgroup_dir("garbage", 7, "/cg", dir, sizeof dir, &v1), -1);
}

TEST(agent_oom_kmsg_record_names_the_pid_after_the_mark)
{
    const char *rec =
        "3,453,519266668,-;Memory cgroup out of memory: Killed process 29955 (python3) "
        "total-vm:323776kB\n";
    ASSERT(agent__oom_kmsg_record_names(rec, strlen(rec), 29955, 519266000));
    ASSERT(!agent__oom_kmsg_record_names(rec, strlen(rec), 29955, 519266669)); /* before the mark */
    ASSERT(!agent__oom_kmsg_record_names(rec, strlen(rec), 2995, 0));          /* another pid */
    ASSERT(!agent__oom_kmsg_record_names("3,1;no ts", 9, 1, 0));
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ASSERT(f != NULL);
    fputs(text, f);
    fclose(f);
}

TEST(agent_oom_mark_compares_the_count_over_a_fake_tree)
{
    char root[256], path[512];
    snprintf(root, sizeof root, "%s/oomtree.%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
    snprintf(path, sizeof path, "%s/proc/42", root);
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "mkdir -p %s %s/cg/job", path, root);
    ASSERT_EQ(system(cmd), 0);
    snprintf(path, sizeof path, "%s/proc/42/cgroup", root);
    write_file(path, "0::/job\n");
    snprintf(path, sizeof path, "%s/cg/job/memory.events", root);
    write_file(path, "oom 0\noom_kill 4\n");
    char proc[300], cg[300];
    snprintf(proc, sizeof proc, "%s/proc", root);
    snprintf(cg, sizeof cg, "%s/cg", root);
    agent_oom_mark mark;
    agent__oom_mark_at(proc, cg, 42, &mark);
    ASSERT(mark.known);
    ASSERT_EQ(mark.kills, (uint64_t)4);
    char how[128];
    ASSERT(!agent__oom_killed_at(&mark, 42, NULL, how, sizeof how));
    write_file(path, "oom 1\noom_kill 5\n");
    ASSERT(agent__oom_killed_at(&mark, 42, NULL, how, sizeof how));
    ASSERT_STR_EQ(how, "memory.events oom_kill 4 -> 5");
    agent__oom_mark_at(proc, cg, 43, &mark); /* no such pid: nothing known, never a kill */
    ASSERT(!mark.known);
    ASSERT(!agent__oom_killed_at(&mark, 43, NULL, how, sizeof how));
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    ASSERT_EQ(system(cmd), 0);
}

/* A child put in a fresh memory cgroup with a small limit touches more than
 * it: the kernel kills it, and both witnesses say so. Skipped where the host
 * does not let this process make a memory cgroup. */
static bool write_text(const char *dir, const char *name, const char *text)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return false;
    bool ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
    close(fd);
    return ok;
}

TEST_TIMEOUT(agent_oom_real_cgroup_kill_is_seen, 60)
{
    char text[4096], dir[400], child_dir[480];
    bool v1 = false;
    FILE *f = fopen("/proc/self/cgroup", "r");
    ASSERT(f != NULL);
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = '\0';
    if (agent__oom_cgroup_dir(text, len, "/sys/fs/cgroup", dir, sizeof dir, &v1) != 0)
        test__skip("no memory cgroup");
    snprintf(child_dir, sizeof child_dir, "%s/elastic_oom_test.%d", dir, (int)getpid());
    if (mkdir(child_dir, 0755) != 0) test__skip("cannot make a memory cgroup here");
    bool limited = v1 ? write_text(child_dir, "memory.limit_in_bytes", "33554432")
                      : write_text(child_dir, "memory.max", "33554432");
    if (v1)
        write_text(child_dir, "memory.memsw.limit_in_bytes", "33554432"); /* no swap to flee to */
    else
        write_text(child_dir, "memory.swap.max", "0");
    if (!limited) {
        rmdir(child_dir);
        test__skip("cannot limit a memory cgroup here");
    }
    int ready[2], go[2];
    ASSERT_EQ(pipe(ready), 0);
    ASSERT_EQ(pipe(go), 0);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        char me[32];
        snprintf(me, sizeof me, "%d", (int)getpid());
        if (!write_text(child_dir, "cgroup.procs", me)) _exit(3);
        char c = 'r';
        if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1) _exit(4);
        size_t size = 256u << 20;
        char *p = malloc(size);
        for (size_t i = 0; p != NULL && i < size; i += 4096) p[i] = 1;
        _exit(5); /* not killed: the limit did not hold */
    }
    char c;
    ASSERT_EQ(read(ready[0], &c, 1), 1);
    agent_oom_mark mark;
    agent__oom_mark(pid, &mark); /* while it lives: a dead one shows the root cgroup */
    ASSERT(mark.known);
    ASSERT(strstr(mark.counter_path, "elastic_oom_test") != NULL);
    ASSERT_EQ(write(go[1], "g", 1), 1);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    char how[160];
    bool killed = agent__oom_killed_at(&mark, pid, NULL, how, sizeof how);
    agent_oom_mark blind = mark; /* no cgroup: the kernel's log alone */
    blind.known = false;
    bool logged = access("/dev/kmsg", R_OK) == 0 &&
                  agent__oom_killed_at(&blind, pid, "/dev/kmsg", how, sizeof how);
    for (int i = 0; i < 100 && rmdir(child_dir) != 0 && errno == EBUSY; i++) usleep(10000);
    ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    ASSERT(killed);
    if (access("/dev/kmsg", R_OK) == 0) ASSERT(logged);
    close(ready[0]), close(ready[1]), close(go[0]), close(go[1]);
}
