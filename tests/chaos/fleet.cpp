#include "chaos/fleet.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "chaos/call_log.hpp"

namespace redlimit::chaos {
namespace {

/// Starts `args[0]` with its standard error in `stderr_path`; it dies with the driver.
pid_t start_worker(std::vector<std::string> args, const std::string& stderr_path) {
  std::vector<char*> argv;
  for (auto& arg : args)
    argv.push_back(arg.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int fd = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) dup2(fd, STDERR_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

}  // namespace

Fleet::Fleet(std::string binary, std::string url, std::string log_dir, std::uint64_t seed, int size,
             std::vector<std::string> worker_options)
    : binary_(std::move(binary)),
      url_(std::move(url)),
      log_dir_(std::move(log_dir)),
      seed_(seed),
      worker_options_(std::move(worker_options)),
      slots_(static_cast<std::size_t>(size), -1) {}

Fleet::~Fleet() {
  stop(0);
}

void Fleet::start() {
  for (int slot = 0; slot < size(); ++slot)
    launch(slot);
}

void Fleet::launch(int slot) {
  std::lock_guard lock(mutex_);
  const int index = static_cast<int>(runs_.size());
  WorkerRun run;
  run.log_path = log_dir_ + "/worker-" + std::to_string(index) + ".log";
  run.start_ns = monotonic_ns();
  std::vector<std::string> args{binary_, url_, run.log_path,
                                std::to_string(seed_ + 1 + static_cast<unsigned>(index))};
  args.insert(args.end(), worker_options_.begin(), worker_options_.end());
  run.pid =
      start_worker(std::move(args), log_dir_ + "/worker-" + std::to_string(index) + ".stderr");
  runs_.push_back(run);
  slots_[static_cast<std::size_t>(slot)] = index;
}

void Fleet::start_burst(int slot) {
  std::lock_guard lock(mutex_);
  ::kill(runs_[static_cast<std::size_t>(slots_[static_cast<std::size_t>(slot)])].pid, SIGUSR1);
}

void Fleet::kill_and_replace(int slot) {
  {
    std::lock_guard lock(mutex_);
    WorkerRun& run = runs_[static_cast<std::size_t>(slots_[static_cast<std::size_t>(slot)])];
    ::kill(run.pid, SIGKILL);
    waitpid(run.pid, nullptr, 0);
    run.end_ns = monotonic_ns();
    run.killed = true;
  }
  launch(slot);
}

void Fleet::kill_in_burst(int slot) {
  start_burst(slot);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  kill_and_replace(slot);
}

void Fleet::stop(int grace_ms) {
  std::lock_guard lock(mutex_);
  for (int index : slots_) {
    if (index >= 0) ::kill(runs_[static_cast<std::size_t>(index)].pid, SIGTERM);
  }
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  for (int& index : slots_) {
    if (index < 0) continue;
    WorkerRun& run = runs_[static_cast<std::size_t>(index)];
    int status = 0;
    while (waitpid(run.pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > give_up) {
        ::kill(run.pid, SIGKILL);
        waitpid(run.pid, &status, 0);
        status = -1;  // did not end by itself
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    run.exit_status = status;
    run.end_ns = monotonic_ns();
    index = -1;
  }
}

std::vector<std::pair<int, pid_t>> Fleet::live() const {
  std::lock_guard lock(mutex_);
  std::vector<std::pair<int, pid_t>> out;
  for (int index : slots_) {
    if (index >= 0) out.emplace_back(index, runs_[static_cast<std::size_t>(index)].pid);
  }
  return out;
}

std::vector<WorkerRun> Fleet::runs() const {
  std::lock_guard lock(mutex_);
  return runs_;
}

}  // namespace redlimit::chaos
