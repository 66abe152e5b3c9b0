package bmcsim

import (
	"net/http"
	"strconv"
	"time"
)

// Task states (Redfish TaskState) the simulator reports.
const (
	TaskNew       = "New"
	TaskPending   = "Pending" // waits for the next boot (a job "scheduled" on reset)
	TaskRunning   = "Running"
	TaskCompleted = "Completed"
	TaskException = "Exception"
)

// DefaultTaskDuration is how long (on the service's Clock) a task runs when
// Config.TaskDuration is zero.
const DefaultTaskDuration = 3 * time.Second

// task is one asynchronous operation: a volume created or deleted, a firmware
// image applied, BIOS settings waiting for a reboot. Its state is derived from
// the clock each time it is read, so a ManualClock moves it deterministically.
type task struct {
	id, name string
	kind     string // Dell JobType on iDRAC: RAIDConfiguration, BIOSConfiguration, FirmwareUpdate
	start    time.Time
	end      time.Time
	dur      time.Duration
	// waitBoot makes the task Pending until sys has powered on more than
	// bootsAtStart times; then it completes.
	waitBoot     bool
	sys          *system
	bootsAtStart int
	done         func() // runs once when the task completes (not on failure)
	failed       func() // runs once when the task ends in Exception

	state   string
	percent int
	message Message
}

// newTask registers a task that starts now and runs done on completion.
func (s *Service) newTask(name, kind string, done func()) *task {
	s.taskMu.Lock()
	defer s.taskMu.Unlock()
	s.nextTask++
	id := strconv.Itoa(s.nextTask)
	if s.p.TaskIDPrefix != "" {
		id = s.p.TaskIDPrefix + strconv.FormatInt(int64(760000000000+s.nextTask), 10)
	}
	t := &task{id: id, name: name, kind: kind, start: s.clock.Now(), dur: s.taskDur, done: done,
		state: TaskNew}
	s.tasks = append(s.tasks, t)
	s.taskByID[id] = t
	return t
}

// newBootTask registers a task that completes at the next power-on of sys.
func (s *Service) newBootTask(name, kind string, sys *system) *task {
	t := s.newTask(name, kind, nil)
	s.taskMu.Lock()
	defer s.taskMu.Unlock()
	t.waitBoot, t.sys, t.state = true, sys, TaskPending
	if c, ok := sys.backend.(powerOnCounter); ok {
		t.bootsAtStart = c.PowerOns()
	}
	return t
}

// advanceTasks moves every unfinished task on to the current time, applying
// the task faults, and then runs the completion of those that completed.
func (s *Service) advanceTasks() {
	now := s.clock.Now()
	f := s.faults.Load()
	var finished []func()
	s.taskMu.Lock()
	for _, t := range s.tasks {
		if t.state == TaskCompleted || t.state == TaskException {
			continue
		}
		if t.waitBoot {
			if c, ok := t.sys.backend.(powerOnCounter); ok && c.PowerOns() > t.bootsAtStart {
				t.state, t.percent, t.end = TaskCompleted, 100, now
				t.message = msg("TaskEvent.1.0.TaskCompletedOK", "The task with Id '"+t.id+"' has completed.", "OK", "None.", nil, t.id)
			}
			continue
		}
		elapsed := now.Sub(t.start)
		switch {
		case f.TaskHang && elapsed >= t.dur/2:
			t.state, t.percent = TaskRunning, 50
		case f.TaskError && elapsed >= t.dur/2:
			t.state, t.percent, t.end = TaskException, 50, now
			t.message = msg("TaskEvent.1.0.TaskAborted", "The task with Id '"+t.id+"' has been aborted.", "Critical",
				"None.", nil, t.id)
			if t.failed != nil {
				finished = append(finished, t.failed)
			}
		case elapsed >= t.dur:
			t.state, t.percent, t.end = TaskCompleted, 100, now
			t.message = msg("TaskEvent.1.0.TaskCompletedOK", "The task with Id '"+t.id+"' has completed.", "OK", "None.", nil, t.id)
			if t.done != nil {
				finished = append(finished, t.done)
			}
		case elapsed > 0:
			t.state, t.percent = TaskRunning, int(100*elapsed/t.dur)
		}
	}
	s.taskMu.Unlock()
	for _, fn := range finished {
		fn()
	}
}

func taskPath(id string) string        { return root + "/TaskService/Tasks/" + id }
func taskMonitorPath(id string) string { return root + "/TaskService/TaskMonitors/" + id }

// taskResource renders a task; the caller holds taskMu.
func taskResource(t *task) map[string]any {
	m := odata(taskPath(t.id), "#Task.v1_7_0.Task")
	m["Id"] = t.id
	m["Name"] = t.name
	m["TaskState"] = t.state
	m["TaskStatus"] = "OK"
	if t.state == TaskException {
		m["TaskStatus"] = "Critical"
	}
	m["PercentComplete"] = t.percent
	m["StartTime"] = t.start.UTC().Format(time.RFC3339)
	if !t.end.IsZero() {
		m["EndTime"] = t.end.UTC().Format(time.RFC3339)
	}
	m["TaskMonitor"] = taskMonitorPath(t.id)
	msgs := []Message{}
	if t.message.MessageID != "" {
		msgs = append(msgs, t.message)
	}
	m["Messages"] = msgs
	return m
}

// writeAccepted answers an operation that became task t: 202 with the task
// monitor in Location and the task as the body.
func (s *Service) writeAccepted(w http.ResponseWriter, t *task) {
	s.taskMu.Lock()
	body := taskResource(t)
	s.taskMu.Unlock()
	w.Header().Set("Location", taskMonitorPath(t.id))
	w.Header().Set("Retry-After", "1")
	writeJSON(w, http.StatusAccepted, body)
}

// routeTasks serves TaskService, its Tasks and the task monitors. A monitor
// answers 202 with the task while it runs, 200 once it completed, and 500 with
// the failure once it ended in Exception (Redfish's async operation protocol).
// A task answers 202 while it runs and 200 after.
func (s *Service) routeTasks(w http.ResponseWriter, r *http.Request, seg []string) *apiError {
	s.syncAllBoots()
	s.advanceTasks()
	s.taskMu.Lock()
	defer s.taskMu.Unlock()
	switch {
	case len(seg) == 0:
		return only(r, "GET", func() *apiError {
			m := odata(root+"/TaskService", "#TaskService.v1_2_0.TaskService")
			m["Id"] = "TaskService"
			m["Name"] = "Task Service"
			m["ServiceEnabled"] = true
			m["CompletedTaskOverWritePolicy"] = "Oldest"
			m["DateTime"] = s.clock.Now().UTC().Format(time.RFC3339)
			m["Status"] = status()
			m["Tasks"] = link(root + "/TaskService/Tasks")
			writeResource(w, r, m)
			return nil
		})
	case len(seg) == 1 && seg[0] == "Tasks":
		return only(r, "GET", func() *apiError {
			var ids []string
			for _, t := range s.tasks {
				ids = append(ids, taskPath(t.id))
			}
			writeResource(w, r, collection(root+"/TaskService/Tasks", "#TaskCollection.TaskCollection", "Task Collection", ids))
			return nil
		})
	case len(seg) == 2 && (seg[0] == "Tasks" || seg[0] == "TaskMonitors"):
		t := s.taskByID[seg[1]]
		if t == nil {
			return errNotFound(r.URL.Path)
		}
		return only(r, "GET", func() *apiError {
			body := taskResource(t)
			running := t.state != TaskCompleted && t.state != TaskException
			if seg[0] == "Tasks" {
				// Like iDRAC, the task itself answers 202 while it runs:
				// sushy polls the task's @odata.id from a 202 body as the
				// monitor.
				if running {
					w.Header().Set("Retry-After", "1")
					writeJSON(w, http.StatusAccepted, body)
					return nil
				}
				writeResource(w, r, body)
				return nil
			}
			switch t.state {
			case TaskCompleted:
				writeJSON(w, http.StatusOK, body)
			case TaskException:
				e := errGeneral(http.StatusInternalServerError)
				e.Info = append(e.Info, t.message)
				return e
			default:
				w.Header().Set("Location", taskMonitorPath(t.id))
				w.Header().Set("Retry-After", "1")
				writeJSON(w, http.StatusAccepted, body)
			}
			return nil
		})
	}
	return errNotFound(r.URL.Path)
}

// Tasks returns the state of every task, by ID, after moving them on to the
// current time: for tests.
func (s *Service) Tasks() map[string]string {
	s.syncAllBoots()
	s.advanceTasks()
	s.taskMu.Lock()
	defer s.taskMu.Unlock()
	out := map[string]string{}
	for _, t := range s.tasks {
		out[t.id] = t.state
	}
	return out
}
