/*
 *
 * Copyright 2022. Metacontroller authors.
 * Licensed under the Apache License, Version 2.0 (the "License");
 * you may not use this file except in compliance with the License.
 * You may obtain a copy of the License at
 *
 * https://www.apache.org/licenses/LICENSE-2.0
 * Unless required by applicable law or agreed to in writing, software
 * distributed under the License is distributed on an "AS IS" BASIS,
 * WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
 * See the License for the specific language governing permissions and
 * limitations under the License.
 * /
 */

package hooks

import (
	"metacontroller/pkg/controller/common/api"
	"net/http"
)

type webhookExecutorPlain struct {
}

func (w *webhookExecutorPlain) enrichHeaders(request *http.Request, webhookRequest api.WebhookRequest) {
	// do nothing
}

func (w *webhookExecutorPlain) adjustResponse(
	request *http.Request,
	webhookRequest api.WebhookRequest,
	responseBody []byte,
	response *http.Response) ([]byte, error) {
	return responseBody, nil
}

func (w *webhookExecutorPlain) isStatusSupported(request *http.Request, response *http.Response) bool {
	return response.StatusCode == http.StatusOK
}
