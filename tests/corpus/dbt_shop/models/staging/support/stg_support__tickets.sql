select
    id as ticket_id,
    lower(requester_email) as requester_email,
    subject,
    lower(priority) as priority,
    lower(status) as ticket_status,
    channel as ticket_channel,
    created_at as opened_at,
    solved_at
from {{ source('support', 'tickets') }}
