package bmcsim

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// baseRegistry is the DMTF Base message registry version our messages cite.
const baseRegistry = "Base.1.16"

// Message is one entry of @Message.ExtendedInfo.
type Message struct {
	ODataType         string   `json:"@odata.type"`
	MessageID         string   `json:"MessageId"`
	Message           string   `json:"Message"`
	MessageArgs       []string `json:"MessageArgs"`
	RelatedProperties []string `json:"RelatedProperties,omitempty"`
	Severity          string   `json:"Severity"`
	MessageSeverity   string   `json:"MessageSeverity"`
	Resolution        string   `json:"Resolution"`
}

// apiError is a Redfish error response: status plus the {"error":{...}} body.
type apiError struct {
	Status  int
	Code    string // "Base.1.16.GeneralError"
	Text    string // error.message
	Info    []Message
	Headers map[string]string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Text) }

func (e *apiError) body() map[string]any {
	info := e.Info
	if info == nil {
		info = []Message{}
	}
	return map[string]any{"error": map[string]any{
		"code":                  e.Code,
		"message":               e.Text,
		"@Message.ExtendedInfo": info,
	}}
}

func (e *apiError) write(w http.ResponseWriter) {
	for k, v := range e.Headers {
		w.Header().Set(k, v)
	}
	writeJSON(w, e.Status, e.body())
}

func msg(id, text, severity, resolution string, related []string, args ...string) Message {
	if args == nil {
		args = []string{}
	}
	return Message{
		ODataType: "#Message.v1_1_2.Message", MessageID: id, Message: text, MessageArgs: args,
		RelatedProperties: related, Severity: severity, MessageSeverity: severity, Resolution: resolution,
	}
}

// baseError builds an error whose code and single message come from the Base
// registry, the way DMTF-conformant services answer.
func baseError(status int, id, text, resolution string, related []string, args ...string) *apiError {
	return &apiError{
		Status: status,
		Code:   baseRegistry + "." + id,
		Text:   text,
		Info:   []Message{msg(baseRegistry+"."+id, text, "Warning", resolution, related, args...)},
	}
}

func errGeneral(status int) *apiError {
	e := baseError(status, "GeneralError",
		"A general error has occurred.  See Resolution for information on how to resolve the error.",
		"None.", nil)
	e.Info[0].Severity, e.Info[0].MessageSeverity = "Critical", "Critical"
	return e
}

func errNoValidSession() *apiError {
	e := baseError(http.StatusUnauthorized, "NoValidSession",
		"There is no valid session established with the implementation.",
		"Establish a session before attempting any operations.", nil)
	e.Headers = map[string]string{"WWW-Authenticate": `Basic realm="Redfish"`}
	return e
}

func errNotFound(uri string) *apiError {
	return baseError(http.StatusNotFound, "ResourceNotFound",
		fmt.Sprintf("The requested resource of type %s named '%s' was not found.", "Resource", uri),
		"Provide a valid resource identifier and resubmit the request.", nil, "Resource", uri)
}

func errMethodNotAllowed(allow string) *apiError {
	e := baseError(http.StatusMethodNotAllowed, "OperationNotAllowed",
		"The HTTP method is not allowed on this resource.",
		"Do not repeat the operation.", nil)
	e.Headers = map[string]string{"Allow": allow}
	return e
}

func errMalformedJSON() *apiError {
	return baseError(http.StatusBadRequest, "MalformedJSON",
		"The request body submitted was malformed JSON and could not be parsed by the receiving service.",
		"Ensure that the request body is valid JSON and resubmit the request.", nil)
}

func errValueNotInList(prop, value string) *apiError {
	return baseError(http.StatusBadRequest, "PropertyValueNotInList",
		fmt.Sprintf("The value '%s' for the property %s is not in the list of acceptable values.", value, prop),
		"Choose a value from the enumeration list that the implementation can support and resubmit the request if the operation failed.",
		[]string{"#/" + prop}, value, prop)
}

func errValueType(prop, value string) *apiError {
	return baseError(http.StatusBadRequest, "PropertyValueTypeError",
		fmt.Sprintf("The value '%s' for the property %s is not a type that the property can accept.", value, prop),
		"Correct the value for the property in the request body and resubmit the request if the operation failed.",
		[]string{"#/" + prop}, value, prop)
}

func errPropertyUnknown(prop string) *apiError {
	return baseError(http.StatusBadRequest, "PropertyUnknown",
		fmt.Sprintf("The property %s is not in the list of valid properties for the resource.", prop),
		"Remove the unknown property from the request body and resubmit the request if the operation failed.",
		[]string{"#/" + prop}, prop)
}

func errPropertyNotWritable(prop string) *apiError {
	return baseError(http.StatusBadRequest, "PropertyNotWritable",
		fmt.Sprintf("The property %s is a read only property and cannot be assigned a value.", prop),
		"Remove the property from the request body and resubmit the request if the operation failed.",
		[]string{"#/" + prop}, prop)
}

func errActionParamMissing(action, param string) *apiError {
	return baseError(http.StatusBadRequest, "ActionParameterMissing",
		fmt.Sprintf("The action %s requires the parameter %s to be present in the request body.", action, param),
		"Supply the action with the required parameter in the request body when the request is resubmitted.",
		[]string{"#/" + param}, action, param)
}

func errActionParamNotSupported(action, param, value string) *apiError {
	return baseError(http.StatusBadRequest, "ActionParameterValueNotInList",
		fmt.Sprintf("The value '%s' for the parameter %s in the action %s is not in the list of acceptable values.", value, param, action),
		"Choose a value from the enumeration list that the implementation can support and resubmit the request if the operation failed.",
		[]string{"#/" + param}, value, param, action)
}

func errResourceInUse() *apiError {
	return baseError(http.StatusConflict, "ResourceInUse",
		"The change to the requested resource failed because the resource is in use or in transition.",
		"Remove the condition and resubmit the request if the operation failed.", nil)
}

func errPreconditionFailed() *apiError {
	return baseError(http.StatusPreconditionFailed, "PreconditionFailed",
		"The ETag supplied did not match the ETag required to change this resource.",
		"Try the operation again using the appropriate ETag.", nil)
}

func errSessionLimit() *apiError {
	return baseError(http.StatusServiceUnavailable, "SessionLimitExceeded",
		"The session establishment failed due to the number of simultaneous sessions exceeding the limit of the implementation.",
		"Reduce the number of other sessions before trying to establish the session or increase the limit of simultaneous sessions (if supported).", nil)
}

func errNotPoweredOn() *apiError {
	return baseError(http.StatusConflict, "ActionNotSupported",
		"The action ComputerSystem.Reset is not supported by the resource in its current power state.",
		"Power the system on and resubmit the request.", nil, "ComputerSystem.Reset")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("OData-Version", "4.0")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
