package bmcsim

import (
	"context"
	"net/http"
	"time"
)

// idracBiosJob: iDRAC turns a BIOS settings PATCH into a configuration job
// (JID_…) under Managers/iDRAC.Embedded.1/Jobs, answers 202 with the job in
// Location, and runs the job at the next reboot. @Redfish.SettingsApplyTime
// "Immediate" reboots the host at once so the job runs now; the maintenance
// window values behave as OnReset here. (Dell iDRAC Redfish API guide,
// "BIOS attributes" and "Job service"; Ironic's idrac-redfish bios interface.)
func idracBiosJob(s *Service, w http.ResponseWriter, r *http.Request, sys *system, applyTime string) *apiError {
	t := s.newBootTask("Configure: BIOS.Setup.1-1", "BIOSConfiguration", sys)
	if applyTime == "Immediate" {
		ps, err := sys.backend.PowerState(r.Context())
		if err != nil {
			return errGeneral(http.StatusInternalServerError)
		}
		rt := ResetForceRestart
		if ps == PowerOff || ps == PowerPoweringOff {
			rt = ResetOn
		}
		if err := sys.backend.Reset(context.WithoutCancel(r.Context()), rt); err != nil {
			return errGeneral(http.StatusInternalServerError)
		}
		s.syncBoots(sys)
	}
	w.Header().Set("Location", idracJobPath(s, t.id))
	writeJSON(w, http.StatusAccepted, map[string]any{"@Message.ExtendedInfo": []Message{
		msg("IDRAC.2.8.SYS053", "Successfully scheduled a job.", "Informational", "No response action is required.", nil)}})
	return nil
}

func idracJobPath(s *Service, id string) string {
	return root + "/Managers/" + s.p.ManagerID + "/Jobs/" + id
}

// iloBiosResetRequired: iLO 5 accepts a BIOS settings PATCH with 200 and its
// error envelope carrying iLO.2.15.SystemResetRequired, and its settings
// object ("pending settings") lists every attribute, not only the changed
// ones (HPE iLO 5 Redfish API reference, "BIOS settings").
func iloBiosResetRequired(_ *Service, w http.ResponseWriter, _ *http.Request, _ *system, _ string) *apiError {
	m := msg("iLO.2.15.SystemResetRequired", "One or more properties were changed and will not take effect until system is reset.",
		"Warning", "Reset the system for the changes to take effect.", nil)
	iloEnvelope(http.StatusOK, []Message{m}).write(w)
	return nil
}

// dellJobState maps a task's state to a Dell Job's JobState.
func dellJobState(state string) string {
	switch state {
	case TaskNew, TaskPending:
		return "Scheduled"
	case TaskRunning:
		return "Running"
	case TaskException:
		return "Failed"
	}
	return "Completed"
}

// routeJobs serves iDRAC's Managers/<id>/Jobs: every task seen as a Dell job.
func (s *Service) routeJobs(w http.ResponseWriter, r *http.Request, seg []string) *apiError {
	s.syncAllBoots()
	s.advanceTasks()
	s.taskMu.Lock()
	defer s.taskMu.Unlock()
	cpath := root + "/Managers/" + s.p.ManagerID + "/Jobs"
	if len(seg) == 0 {
		return only(r, "GET", func() *apiError {
			var ids []string
			for _, t := range s.tasks {
				ids = append(ids, cpath+"/"+t.id)
			}
			writeResource(w, r, collection(cpath, "#DellJobCollection.DellJobCollection", "JobQueue", ids))
			return nil
		})
	}
	t := s.taskByID[seg[0]]
	if t == nil || len(seg) != 1 {
		return errNotFound(r.URL.Path)
	}
	return only(r, "GET", func() *apiError {
		m := odata(cpath+"/"+t.id, "#DellJob.v1_5_0.DellJob")
		m["Id"] = t.id
		m["Name"] = t.name
		m["JobType"] = t.kind
		m["JobState"] = dellJobState(t.state)
		m["PercentComplete"] = t.percent
		m["StartTime"] = t.start.UTC().Format(time.RFC3339)
		if !t.end.IsZero() {
			m["CompletionTime"] = t.end.UTC().Format(time.RFC3339)
		}
		m["Message"] = "Job scheduled successfully."
		if t.message.MessageID != "" {
			m["Message"] = t.message.Message
		}
		m["MessageId"] = "IDRAC.2.8.JCP001"
		writeResource(w, r, m)
		return nil
	})
}
