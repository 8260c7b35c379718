#include "cli/launch_env.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

std::string ErrorOf(const absl::StatusOr<LaunchEnv>& s) {
  return s.ok() ? "OK" : std::string(s.status().message());
}

std::string ListError(absl::string_view list) {
  auto s = ExpandHostList(list, "SLURM_JOB_NODELIST");
  return s.ok() ? "OK" : std::string(s.status().message());
}

TEST(HostList, ExpandsRangesListsAndPadding) {
  EXPECT_THAT(*ExpandHostList("node[01-03,7],gpu5", "V"),
              ElementsAre("node01", "node02", "node03", "node7", "gpu5"));
  EXPECT_THAT(*ExpandHostList("vm", "V"), ElementsAre("vm"));
  EXPECT_THAT(*ExpandHostList("n[8-11]", "V"),
              ElementsAre("n8", "n9", "n10", "n11"));
  EXPECT_THAT(*ExpandHostList("n[098-101]", "V"),
              ElementsAre("n098", "n099", "n100", "n101"));
  EXPECT_THAT(*ExpandHostList("a[1-2]-b[1-2].x", "V"),
              ElementsAre("a1-b1.x", "a1-b2.x", "a2-b1.x", "a2-b2.x"));
  EXPECT_THAT(*ExpandHostList("[1-2]x,y[3]", "V"),
              ElementsAre("1x", "2x", "y3"));
  EXPECT_THAT(*ExpandHostList("c[0-65535]", "V"), SizeIs(65536));
}

TEST(HostList, RefusesMalformedListsNamingTheVariable) {
  struct Case {
    const char* list;
    const char* why;
  } cases[] = {
      {"", "an empty host name"},
      {"a,,b", "an empty host name"},
      {"a,", "an empty host name"},
      {"node[01-03", "a \"[\" without its \"]\""},
      {"node01-03]", "a \"]\" without its \"[\""},
      {"n[1-[2]]", "a \"[\" inside \"[...]\""},
      {"n[]", "\"[]\" holds \"\""},
      {"n[3-1]", "\"[3-1]\" holds \"3-1\""},
      {"n[a-b]", "not a number or a range"},
      {"n[1-]", "not a number or a range"},
      {"n[1,,2]", "not a number or a range"},
      {"n[-1]", "not a number or a range"},
      {"n[1-2-3]", "not a number or a range"},
      {"n[1:2]", "not a number or a range"},
      {"node 1", "\" \" cannot be part of a host name"},
      {"a/b", "\"/\" cannot be part of a host name"},
      {"n[0-65536]", "more than 65536 hosts"},
      {"a[0-999]b[0-999]", "more than 65536 hosts"},
      {"n[0-999999999]", "more than 65536 hosts"},
  };
  for (const Case& c : cases) {
    const std::string e = ListError(c.list);
    EXPECT_THAT(e, HasSubstr(c.why)) << c.list;
    EXPECT_THAT(e,
                HasSubstr(absl::StrCat("SLURM_JOB_NODELIST=\"", c.list, "\"")))
        << c.list;
  }
}

EnvMap SlurmStep() {
  return {{"SLURM_PROCID", "1"},  {"SLURM_NTASKS", "3"},
          {"SLURM_STEP_ID", "0"}, {"SLURM_JOB_ID", "4242"},
          {"SLURM_LOCALID", "0"}, {"SLURM_JOB_NODELIST", "node[01-03]"}};
}

TEST(LaunchEnv, NothingSetIsNoLaunch) {
  auto env = ReadLaunchEnv({{"HOME", "/root"}, {"SLURM_JOB_ID", "7"}});
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->source, LaunchSource::kNone);
}

TEST(LaunchEnv, SlurmStepPutsTheCoordinatorOnTheFirstNode) {
  auto env = ReadLaunchEnv(SlurmStep());
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->source, LaunchSource::kSlurm);
  EXPECT_EQ(env->rank, 1);
  EXPECT_EQ(env->world_size, 3);
  EXPECT_FALSE(env->runs_coordinator());
  EXPECT_THAT(env->nodes, ElementsAre("node01", "node02", "node03"));
  EXPECT_EQ(env->CoordinatorAddress(), "node01:29400");
  EXPECT_EQ(env->job_id, "4242");
  EXPECT_EQ(env->Describe(),
            "SLURM job 4242: task 1 of 3 on 3 nodes; coordinator at "
            "node01:29400 (the default port)");
}

TEST(LaunchEnv, SlurmPrefersTheStepsNodes) {
  EnvMap e = SlurmStep();
  e["SLURM_STEP_NODELIST"] = "node[02-03]";
  EXPECT_EQ(ReadLaunchEnv(e)->CoordinatorAddress(), "node02:29400");
}

TEST(LaunchEnv, PortFlagBeatsEnvironmentBeatsDefault) {
  EnvMap e = SlurmStep();
  e["COHORT_COORDINATOR_PORT"] = "31000";
  EXPECT_EQ(ReadLaunchEnv(e)->CoordinatorAddress(), "node01:31000");
  EXPECT_EQ(ReadLaunchEnv(e)->port_from, "COHORT_COORDINATOR_PORT");
  EXPECT_EQ(ReadLaunchEnv(e, 32000)->CoordinatorAddress(), "node01:32000");
  EXPECT_THAT(ReadLaunchEnv(e, 32000)->Describe(),
              HasSubstr("(port from --coordinator-port)"));
}

TEST(LaunchEnv, SlurmBatchScriptOfSeveralTasksIsRefused) {
  EnvMap e = SlurmStep();
  e.erase("SLURM_STEP_ID");
  e["SLURM_PROCID"] = "0";
  auto env = ReadLaunchEnv(e);
  ASSERT_TRUE(env.ok()) << env.status();  // `cohort coordinator` may run there
  EXPECT_TRUE(env->slurm_batch_script);
  EXPECT_THAT(std::string(CheckOneProcessPerTask(*env).message()),
              HasSubstr("start cohort launch with srun, one task per node"));
  e["SLURM_NTASKS"] = "1";  // a one-task job may run in the script itself
  EXPECT_TRUE(CheckOneProcessPerTask(*ReadLaunchEnv(e)).ok());
  EXPECT_TRUE(CheckOneProcessPerTask(*ReadLaunchEnv(SlurmStep())).ok());
}

TEST(LaunchEnv, MalformedSlurmVariablesAreNamed) {
  struct Case {
    const char* var;
    const char* value;  // nullptr: unset
    const char* want;
  } cases[] = {
      {"SLURM_NTASKS", "three", "SLURM_NTASKS=\"three\": want a whole number"},
      {"SLURM_NTASKS", "0", "SLURM_NTASKS=\"0\": want a whole number in [1,"},
      {"SLURM_NTASKS", nullptr, "SLURM_NTASKS is not set"},
      {"SLURM_PROCID", "3",
       "SLURM_PROCID=\"3\": want a whole number in [0, 2]"},
      {"SLURM_PROCID", "-1", "SLURM_PROCID=\"-1\""},
      {"SLURM_PROCID", " 1", "SLURM_PROCID=\" 1\""},
      {"SLURM_JOB_NODELIST", "node[01-", "SLURM_JOB_NODELIST=\"node[01-\""},
      {"SLURM_JOB_NODELIST", nullptr, "SLURM_JOB_NODELIST is not set"},
      {"SLURM_JOB_ID", "12a", "SLURM_JOB_ID=\"12a\""},
      {"SLURM_LOCALID", "x", "SLURM_LOCALID=\"x\""},
      {"COHORT_COORDINATOR_PORT", "70000",
       "COHORT_COORDINATOR_PORT=\"70000\": want a whole number in [1, 65535]"},
      {"COHORT_COORDINATOR_PORT", "", "COHORT_COORDINATOR_PORT=\"\""},
  };
  for (const Case& c : cases) {
    EnvMap e = SlurmStep();
    if (c.value == nullptr) {
      e.erase(c.var);
    } else {
      e[c.var] = c.value;
    }
    EXPECT_THAT(ErrorOf(ReadLaunchEnv(e)), HasSubstr(c.want)) << c.var;
  }
}

EnvMap Torchrun() {
  return {{"MASTER_ADDR", "cohort-master-0"},
          {"MASTER_PORT", "23456"},
          {"RANK", "0"},
          {"WORLD_SIZE", "2"}};
}

TEST(LaunchEnv, TorchrunRankZeroRunsTheCoordinator) {
  auto env = ReadLaunchEnv(Torchrun());
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->source, LaunchSource::kTorchrun);
  EXPECT_TRUE(env->runs_coordinator());
  EXPECT_EQ(env->CoordinatorAddress(), "cohort-master-0:23456");
  EXPECT_EQ(env->port_from, "MASTER_PORT");
  EXPECT_THAT(env->Describe(), HasSubstr("rank 0 of 2; coordinator at "
                                         "cohort-master-0:23456 (port from "
                                         "MASTER_PORT), run by this task"));
}

TEST(LaunchEnv, TorchrunWinsOverTheSlurmThatStartedIt) {
  EnvMap e = SlurmStep();
  for (const auto& [k, v] : Torchrun()) e[k] = v;
  EXPECT_EQ(ReadLaunchEnv(e)->source, LaunchSource::kTorchrun);
}

TEST(LaunchEnv, TorchrunIpv6AddressesAreBracketed) {
  EnvMap e = Torchrun();
  e["MASTER_ADDR"] = "fd00::1";
  EXPECT_EQ(ReadLaunchEnv(e)->CoordinatorAddress(), "[fd00::1]:23456");
  e["MASTER_ADDR"] = "[fd00::1]";
  EXPECT_EQ(ReadLaunchEnv(e)->CoordinatorAddress(), "[fd00::1]:23456");
  EXPECT_EQ(ReadLaunchEnv(e, 40000)->CoordinatorAddress(), "[fd00::1]:40000");
}

TEST(LaunchEnv, TorchrunLocalRank) {
  EnvMap e = Torchrun();
  e["LOCAL_RANK"] = "1";
  e["LOCAL_WORLD_SIZE"] = "2";
  auto env = ReadLaunchEnv(e);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->local_world_size, 2);
  e["LOCAL_RANK"] = "2";
  EXPECT_THAT(ErrorOf(ReadLaunchEnv(e)),
              HasSubstr("LOCAL_RANK=\"2\": want a whole number in [0, 1]"));
}

TEST(LaunchEnv, MalformedTorchrunVariablesAreNamed) {
  struct Case {
    const char* var;
    const char* value;
    const char* want;
  } cases[] = {
      {"MASTER_ADDR", nullptr, "MASTER_ADDR is not set"},
      {"MASTER_ADDR", "", "MASTER_ADDR=\"\": want a host name or an IP"},
      {"MASTER_ADDR", "host:29500",
       "MASTER_ADDR=\"host:29500\": want a host "
       "name or an IP address (no port)"},
      {"MASTER_ADDR", "10.0.0.1", nullptr},
      {"MASTER_ADDR", "fe80::1%eth0", nullptr},
      {"MASTER_ADDR", "tcp://host", "MASTER_ADDR=\"tcp://host\""},
      {"MASTER_ADDR", "a b", "MASTER_ADDR=\"a b\""},
      {"MASTER_PORT", nullptr, "MASTER_PORT is not set"},
      {"MASTER_PORT", "0",
       "MASTER_PORT=\"0\": want a whole number in [1, "
       "65535]"},
      {"MASTER_PORT", "29500x", "MASTER_PORT=\"29500x\""},
      {"RANK", nullptr, "RANK is not set"},
      {"RANK", "2", "RANK=\"2\": want a whole number in [0, 1]"},
      {"WORLD_SIZE", nullptr, "WORLD_SIZE is not set"},
      {"WORLD_SIZE", "0", "WORLD_SIZE=\"0\""},
      {"WORLD_SIZE", "99999999999", "WORLD_SIZE=\"99999999999\""},
      {"LOCAL_WORLD_SIZE", "3", "LOCAL_WORLD_SIZE=\"3\""},
  };
  for (const Case& c : cases) {
    EnvMap e = Torchrun();
    if (c.value == nullptr) {
      e.erase(c.var);
    } else {
      e[c.var] = c.value;
    }
    if (c.want == nullptr) {
      EXPECT_TRUE(ReadLaunchEnv(e).ok()) << c.var << "=" << c.value;
    } else {
      EXPECT_THAT(ErrorOf(ReadLaunchEnv(e)), HasSubstr(c.want)) << c.var;
    }
  }
}

TEST(LaunchEnv, JobNameFromSlurmOnlyForAnUnnamedSpec) {
  LaunchEnv slurm = *ReadLaunchEnv(SlurmStep());
  EXPECT_EQ(LaunchJobName(slurm, "job"), "slurm-4242");
  EXPECT_EQ(LaunchJobName(slurm, "mnist-lenet5"), "mnist-lenet5");
  LaunchEnv torchrun = *ReadLaunchEnv(Torchrun());
  EXPECT_EQ(LaunchJobName(torchrun, "job"), "job");
}

}  // namespace
}  // namespace cohort
